//! Turns what an agent sent into an async function body (SPEC §5).
//!
//! 1. Trim; if there is a fenced block, keep the first block's contents.
//! 2. Parse as TypeScript with top-level `await` and `return`. A program
//!    that is one arrow/function expression is called and its value
//!    returned; one named function declaration gets a call appended; an
//!    `export default` is unwrapped the same way. A bare expression is left
//!    alone (no implicit return).
//! 3. Strip type syntax with oxc's TypeScript transform. `enum` and
//!    `const enum` compile as `tsc` compiles them: an enum becomes an object
//!    with reverse mappings for numeric members, declarations of the same
//!    name merge, a `declare enum` leaves nothing behind, and `const enum`
//!    members are inlined where they are used. Decorators and `import` are
//!    refused with a clear message.

use std::path::Path;

use executor_sandbox::AgentError;
use oxc::allocator::Allocator;
use oxc::ast::ast::{
    BinaryExpression, BinaryOperator, Decorator, ExportDefaultDeclarationKind, Expression,
    ImportDeclaration, ImportExpression, Program, Statement, TSEnumMember, TemplateLiteral,
};
use oxc::ast_visit::{Visit, walk};
use oxc::codegen::Codegen;
use oxc::diagnostics::OxcDiagnostic;
use oxc::parser::{ParseOptions, Parser};
use oxc::semantic::SemanticBuilder;
use oxc::span::{GetSpan, SourceType, Span};
use oxc::transformer::{TransformOptions, Transformer};

/// Normalises agent code into a strict async function body, or explains
/// (in agent-facing words) why it cannot run.
pub fn normalize(code: &str) -> Result<String, AgentError> {
    let source = extract_code(code);
    if source.is_empty() {
        return Ok(String::new());
    }
    let allocator = Allocator::default();
    let program = parse(&allocator, source)?;
    refuse_unsupported(&program, source)?;
    check_early_errors(&program, source)?;
    match rewrite_entry_point(&program, source) {
        // The edit changed the text: strip types from the edited program.
        Some(edited) => {
            let allocator = Allocator::default();
            let program = parse(&allocator, &edited)?;
            Ok(strip_types(&allocator, program))
        }
        None => Ok(strip_types(&allocator, program)),
    }
}

/// Trims, and keeps the first fenced block's contents when there is one.
pub fn extract_code(code: &str) -> &str {
    let trimmed = code.trim();
    first_fenced_block(trimmed)
        .map(str::trim)
        .unwrap_or(trimmed)
}

fn first_fenced_block(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after_fence = &text[open + 3..];
    // The info string (```ts, ```javascript) runs to the end of the line.
    let body_start = after_fence.find('\n').map(|i| i + 1)?;
    let body = &after_fence[body_start..];
    let close = body.find("```")?;
    Some(&body[..close])
}

fn parse<'a>(allocator: &'a Allocator, source: &'a str) -> Result<Program<'a>, AgentError> {
    let options = ParseOptions {
        allow_return_outside_function: true,
        ..ParseOptions::default()
    };
    let ret = Parser::new(allocator, source, SourceType::ts().with_module(true))
        .with_options(options)
        .parse();
    if let Some(first) = ret.diagnostics.first() {
        return Err(AgentError::new(syntax_error(first, source)));
    }
    if ret.panicked {
        return Err(AgentError::new(
            "SyntaxError: the program could not be parsed",
        ));
    }
    Ok(ret.program)
}

/// Strict-mode early errors (redeclarations, `delete x`, legacy octals …),
/// reported by oxc with a position instead of by QuickJS without one.
fn check_early_errors(program: &Program<'_>, source: &str) -> Result<(), AgentError> {
    let ret = SemanticBuilder::new()
        .with_check_syntax_error(true)
        .build(program);
    match ret.diagnostics.first() {
        Some(first) => Err(AgentError::new(syntax_error(first, source))),
        None => Ok(()),
    }
}

/// `SyntaxError: <what> (line L, column C)`.
fn syntax_error(diagnostic: &OxcDiagnostic, source: &str) -> String {
    let mut message = format!("SyntaxError: {}", diagnostic.message);
    // The primary label marks the offending place (a redeclaration, not the
    // first declaration); without one, the last label is the latest place.
    let label = diagnostic
        .labels
        .iter()
        .find(|l| l.primary())
        .or(diagnostic.labels.last());
    if let Some(label) = label {
        let (line, column) = line_column(source, label.offset() as usize);
        message.push_str(&format!(" (line {line}, column {column})"));
    }
    if let Some(help) = &diagnostic.help {
        message.push_str(&format!(". {help}"));
    }
    message
}

fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, column)
}

/// Finds syntax the sandbox does not run and says so plainly.
fn refuse_unsupported(program: &Program<'_>, source: &str) -> Result<(), AgentError> {
    let mut finder = UnsupportedFinder::default();
    finder.visit_program(program);
    match finder.found {
        None => Ok(()),
        Some((what, span)) => {
            let (line, column) = line_column(source, span.start as usize);
            Err(AgentError::new(format!(
                "{what} (line {line}, column {column})"
            )))
        }
    }
}

#[derive(Default)]
struct UnsupportedFinder {
    found: Option<(&'static str, Span)>,
}

impl UnsupportedFinder {
    fn note(&mut self, what: &'static str, span: Span) {
        if self.found.is_none() {
            self.found = Some((what, span));
        }
    }
}

/// Whether an enum member's initializer builds text at compile time (`+`,
/// a template with expressions): oxc's enum evaluator computes such values
/// on the host with no bound, so `B = A + A, C = B + B, …` would double a
/// string per member.
#[derive(Default)]
struct BuildsText(bool);

impl<'a> Visit<'a> for BuildsText {
    fn visit_binary_expression(&mut self, it: &BinaryExpression<'a>) {
        if it.operator == BinaryOperator::Addition {
            self.0 = true;
        }
        walk::walk_binary_expression(self, it);
    }

    fn visit_template_literal(&mut self, it: &TemplateLiteral<'a>) {
        if !it.expressions.is_empty() {
            self.0 = true;
        }
        walk::walk_template_literal(self, it);
    }
}

impl<'a> Visit<'a> for UnsupportedFinder {
    fn visit_ts_enum_member(&mut self, it: &TSEnumMember<'a>) {
        if let Some(init) = &it.initializer {
            let mut builds = BuildsText::default();
            builds.visit_expression(init);
            if builds.0 {
                self.note(
                    "enum members computed with `+` or a template are not supported: write the value out",
                    it.span,
                );
            }
        }
        walk::walk_ts_enum_member(self, it);
    }

    fn visit_decorator(&mut self, it: &Decorator<'a>) {
        self.note("decorators are not supported in the sandbox", it.span);
    }

    fn visit_import_declaration(&mut self, it: &ImportDeclaration<'a>) {
        self.note(
            "import is not available in the sandbox: call APIs through tools.*",
            it.span,
        );
    }

    fn visit_import_expression(&mut self, it: &ImportExpression<'a>) {
        self.note(
            "import() is not available in the sandbox: call APIs through tools.*",
            it.span,
        );
        walk::walk_import_expression(self, it);
    }
}

/// Applies the entry-point rules; None when the program stays as it is.
fn rewrite_entry_point(program: &Program<'_>, source: &str) -> Option<String> {
    let text = |span: Span| &source[span.start as usize..span.end as usize];
    let call = |callee: &str| format!("return await ({callee})();");
    // Exports other than a lone `export default` lose their keyword.
    if let [only] = program.body.as_slice() {
        match only {
            Statement::ExpressionStatement(stmt) if is_function_expression(&stmt.expression) => {
                return Some(call(text(stmt.expression.span())));
            }
            Statement::FunctionDeclaration(f) => {
                let name = f.id.as_ref()?.name.as_str();
                return Some(format!("{source}\nreturn await {name}();"));
            }
            Statement::ExportDefaultDeclaration(export) => {
                return Some(match &export.declaration {
                    ExportDefaultDeclarationKind::FunctionDeclaration(f) => call(text(f.span)),
                    ExportDefaultDeclarationKind::ClassDeclaration(c) => {
                        format!("return ({});", text(c.span))
                    }
                    ExportDefaultDeclarationKind::TSInterfaceDeclaration(_) => String::new(),
                    other => match other.as_expression() {
                        Some(e) if is_function_expression(e) => call(text(e.span())),
                        Some(e) => format!("return ({});", text(e.span())),
                        None => return None,
                    },
                });
            }
            _ => {}
        }
    }
    let has_named_exports = program
        .body
        .iter()
        .any(|stmt| matches!(stmt, Statement::ExportDeclaration(_)));
    has_named_exports.then(|| unexport(program, source))
}

/// Drops the `export` keyword from named export declarations.
fn unexport(program: &Program<'_>, source: &str) -> String {
    let mut out = source.to_string();
    let mut spans: Vec<(Span, Span)> = program
        .body
        .iter()
        .filter_map(|stmt| match stmt {
            Statement::ExportDeclaration(export) => Some((export.span, export.declaration.span())),
            _ => None,
        })
        .collect();
    spans.sort_by_key(|(outer, _)| std::cmp::Reverse(outer.start));
    for (outer, inner) in spans {
        out.replace_range(outer.start as usize..inner.start as usize, "");
    }
    out
}

fn is_function_expression(e: &Expression<'_>) -> bool {
    matches!(
        e.without_parentheses(),
        Expression::ArrowFunctionExpression(_) | Expression::FunctionExpression(_)
    )
}

/// Removes type syntax and prints the program back as JavaScript.
fn strip_types<'a>(allocator: &'a Allocator, mut program: Program<'a>) -> String {
    // The enum transform reads member values (`B = A + 1`, string members)
    // from the scoping; without `enum_eval` it cannot inline const enums and
    // gives string members such as `B = A` (`A` a string) a reverse mapping.
    let scoping = SemanticBuilder::new()
        .with_enum_eval(true)
        .build(&program)
        .semantic
        .into_scoping();
    // A const enum is emitted as an object, like a regular enum, rather than
    // inlined at each use as `tsc` does: the program behaves the same, and
    // inlining would let a long member used a million times turn a 4 MiB
    // request into gigabytes of host memory.
    let options = TransformOptions::default();
    let _ = Transformer::new(allocator, Path::new("code.ts"), &options)
        .build_with_scoping(scoping, &mut program);
    Codegen::new().build(&program).code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(code: &str) -> String {
        normalize(code).unwrap_or_else(|e| panic!("{code:?} failed: {e}"))
    }

    #[test]
    fn fenced_blocks_and_trimming() {
        assert_eq!(extract_code("  return 1;  "), "return 1;");
        assert_eq!(
            extract_code("Here:\n```ts\nreturn 2;\n```\nand\n```js\nreturn 3;\n```"),
            "return 2;"
        );
        assert_eq!(extract_code("```js\nreturn 5;"), "```js\nreturn 5;");
    }

    #[test]
    fn plain_bodies_keep_their_meaning() {
        assert_eq!(ok("return 1;").trim(), "return 1;");
        assert_eq!(ok("1 + 2").trim(), "1 + 2;");
        assert!(ok("const x = await Promise.resolve(1); return x;").contains("await"));
    }

    #[test]
    fn functions_are_called() {
        assert_eq!(
            ok("async () => 42").trim(),
            "return await (async () => 42)();"
        );
        assert_eq!(
            ok("(function () { return 1 })").trim(),
            "return await (function() {\n\treturn 1;\n})();"
        );
        assert!(
            ok("async function main() { return 1 }")
                .trim()
                .ends_with("return await main();")
        );
        assert!(ok("export default async () => 7").contains("return await (async () => 7)();"));
        assert!(ok("export default { a: 1 }").contains("return {"));
    }

    #[test]
    fn types_are_stripped() {
        let out = ok(
            "interface A { x: number }\ntype B = string;\nconst a: A = { x: 1 } as A;\nfunction f<T>(v: T): T { return v }\nreturn f<number>(a.x);",
        );
        assert!(
            !out.contains("interface") && !out.contains(": A") && !out.contains("<T>"),
            "{out}"
        );
        assert!(out.contains("return f(a.x)"), "{out}");
    }

    #[test]
    fn enum_members_that_build_text_are_refused() {
        // Each member would double the last: unbounded host memory at compile time.
        let doubling = "enum E { A = 'xxxxxxxxxxxxxxxx', B = A + A, C = B + B, D = C + C }";
        for code in [doubling, "enum T { A = 'a', B = `${A}${A}` }"] {
            let err = normalize(code).unwrap_err();
            assert!(
                err.contains("enum members computed with `+`"),
                "{code}: {err}"
            );
        }
        // Numbers computed from members are fine.
        assert!(normalize("enum F { A = 1 << 2, B = A | 1, C = B * 2 }").is_ok());
    }

    #[test]
    fn enums_compile_as_typescript_does() {
        // (source, pieces the output must contain, pieces it must not).
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "enum Color { Red, Green = 5, Blue }\nreturn Color[5];",
                &[
                    r#"Color[Color["Red"] = 0] = "Red";"#,
                    r#"Color[Color["Green"] = 5] = "Green";"#,
                    r#"Color[Color["Blue"] = 6] = "Blue";"#,
                    "}(Color || {});",
                ],
                &["enum"],
            ),
            // String members get no reverse mapping.
            (
                "enum S { A = 'a', B = 'b' }\nreturn S.A;",
                &[r#"S["A"] = "a";"#, r#"S["B"] = "b";"#],
                &["S[S"],
            ),
            // Values computed from earlier members are folded, as tsc does.
            (
                "enum F { A = 1 << 2, B = A | 1 }\nreturn F.B;",
                &[r#"F[F["A"] = 4] = "A";"#, r#"F[F["B"] = 5] = "B";"#],
                &[],
            ),
            // A const enum is an object too (not inlined: see strip_types).
            (
                "const enum D { Up = 1, Down }\nreturn D.Down;",
                &[r#"D[D["Down"] = 2] = "Down";"#, "return D.Down;"],
                &[],
            ),
            ("declare enum X { A }\nreturn 1;", &["return 1;"], &["X"]),
            // A second declaration of the same name adds to the first.
            (
                "enum M { A = 1 }\nenum M { B = 2 }\nreturn M.B;",
                &["var M = ", "\nM = ", r#"M[M["B"] = 2] = "B";"#],
                &[],
            ),
            (
                "export enum E { A }\nreturn E.A;",
                &[r#"E[E["A"] = 0] = "A";"#],
                &["export"],
            ),
        ];
        for (code, present, absent) in cases {
            let out = ok(code);
            for piece in *present {
                assert!(out.contains(piece), "{code:?} lacks {piece:?}:\n{out}");
            }
            for piece in *absent {
                assert!(!out.contains(piece), "{code:?} has {piece:?}:\n{out}");
            }
        }
        // Redeclaring an enum's name is still an early error with a place.
        assert_eq!(
            normalize("enum E { A }\nconst E = 1;").unwrap_err(),
            "SyntaxError: Identifier `E` has already been declared (line 2, column 7)"
        );
    }

    #[test]
    fn unsupported_syntax_is_refused_clearly() {
        assert!(
            normalize("@dec class C {}")
                .unwrap_err()
                .contains("decorators are not supported")
        );
        assert!(
            normalize("import fs from 'fs';")
                .unwrap_err()
                .contains("import is not available")
        );
        assert!(
            normalize("const m = await import('x');")
                .unwrap_err()
                .contains("import() is not available")
        );
        let e = normalize("const = 5; return 1;").unwrap_err();
        assert!(
            e.starts_with("SyntaxError: ") && e.contains("line 1"),
            "{e}"
        );
    }

    #[test]
    fn named_exports_lose_the_keyword() {
        let out = ok("export const a = 1;\nexport function b() {}\nreturn a;");
        assert!(!out.contains("export"), "{out}");
    }
}
