//! Policies (SPEC §14, §9): the org's ordered rules — the first whose
//! pattern matches a tool decides — added, edited, moved and removed
//! here. A pattern is checked by the operations layer as it is saved; a
//! bad one is the form's error and nothing is stored. As it is typed, the
//! add form's pattern is checked and the tools it matches are listed.

use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use executor_ops::{NewPolicy, OpError, PatternPreview, Policy};
use executor_store::PolicyAction;
use maud::{Markup, html};
use serde::Deserialize;

use crate::ConsoleState;
use crate::error::ConsoleError;
use crate::layout::{self, Section};
use crate::viewer::{Posted, Viewer};

pub(crate) async fn list(
    State(state): State<ConsoleState>,
    viewer: Viewer,
) -> Result<Response, ConsoleError> {
    render(&state, &viewer, None).await
}

/// The page with a pattern being typed in the add form, and what it
/// matches: the no-script way to preview a pattern (Preview posts here).
pub(crate) async fn preview(
    State(state): State<ConsoleState>,
    posted: Posted<RuleForm>,
) -> Result<Response, ConsoleError> {
    let Posted { viewer, form } = posted;
    render(&state, &viewer, Some(&form)).await
}

async fn render(
    state: &ConsoleState,
    viewer: &Viewer,
    typed: Option<&RuleForm>,
) -> Result<Response, ConsoleError> {
    let rules = state.ops.list_policies(&viewer.actor).await?;
    let check = match typed {
        Some(form) => Some(
            state
                .ops
                .preview_pattern(&viewer.actor, &form.pattern)
                .await,
        ),
        None => None,
    };
    let body = html! {
        p.lede { "Rules run top to bottom; the first whose pattern matches a tool decides. "
            "A tool no rule matches follows its default (calls that change things need approval)." }
        @if rules.is_empty() { p.empty { "No rule yet." } } @else {
            table {
                thead { tr { th scope="col" { "#" } th scope="col" { "Pattern" } th scope="col" { "Action" } th scope="col" { span.visually-hidden { "Edit" } } th scope="col" { span.visually-hidden { "Order" } } } }
                tbody { @for (i, rule) in rules.iter().enumerate() { (row(viewer, rule, i, rules.len())) } }
            }
        }
        h2 { "Add a rule" }
        (add_form(viewer, typed))
        div #pattern-check aria-live="polite" {
            @if let Some(check) = &check { (check_result(check)) }
        }
    };
    Ok(layout::page(state, viewer, Section::Policies, "Policies", body).await)
}

#[derive(Deserialize)]
pub(crate) struct CheckQuery {
    #[serde(default)]
    pattern: String,
}

/// `GET /console/policies/check?pattern=`: the pattern checked, and the
/// tools it matches, as a fragment the script puts under the field as
/// the pattern is typed.
pub(crate) async fn check(
    State(state): State<ConsoleState>,
    viewer: Viewer,
    Query(query): Query<CheckQuery>,
) -> Response {
    let markup = match query.pattern.trim() {
        "" => html! {},
        pattern => check_result(&state.ops.preview_pattern(&viewer.actor, pattern).await),
    };
    let mut response = Html(markup.into_string()).into_response();
    layout::headers(&mut response);
    response
}

/// Whether a pattern is good, and the tools it matches now.
fn check_result(check: &Result<PatternPreview, OpError>) -> Markup {
    html! {
        @match check {
            Err(e) => p.problem { "This pattern cannot be saved: " (e.message) }
            Ok(preview) if preview.total == 0 => p.check { "A good pattern; it matches no tool now." }
            Ok(preview) => {
                p.check {
                    "A good pattern; it matches " (preview.total)
                    @if preview.total == 1 { " tool" } @else { " tools" }
                    @if preview.total > preview.tools.len() { ", the first " (preview.tools.len()) " here" }
                    ":"
                }
                ul.matches { @for tool in &preview.tools { li { code { (tool) } } } }
            }
        }
    }
}

/// The add form: its pattern is checked as it is typed (with the script)
/// or with Preview (without).
fn add_form(viewer: &Viewer, typed: Option<&RuleForm>) -> Markup {
    let current = typed.and_then(|f| PolicyAction::from_input(&f.action).ok());
    html! {
        form.inline method="post" action=(viewer.href("/console/policies")) {
            input type="hidden" name="csrf" value=(viewer.csrf);
            label { "Pattern "
                input #new-pattern type="text" name="pattern" required value=(typed.map_or("", |f| f.pattern.as_str()))
                    placeholder="github.*, *.delete*, github.issues.create" size="28"
                    title=(PATTERN_HELP) autocomplete="off"
                    data-check=(viewer.href("/console/policies/check")) aria-describedby="pattern-check";
            }
            (action_select(current))
            button type="submit" { "Add" }
            button type="submit" formaction=(viewer.href("/console/policies/preview")) formnovalidate { "Preview" }
        }
    }
}

/// What a pattern may say, as the field's hint.
const PATTERN_HELP: &str = "A tool address; * stands for one segment, a trailing .* for a subtree";

fn action_select(current: Option<PolicyAction>) -> Markup {
    html! {
        select name="action" aria-label="Action" {
            @for a in PolicyAction::ALL {
                option value=(a.as_str()) selected[current == Some(*a)] { (a.as_str().replace('_', " ")) }
            }
        }
    }
}

fn rule_form(viewer: &Viewer, action: &str, rule: Option<&Policy>, label: &str) -> Markup {
    html! {
        form.inline method="post" action=(viewer.href(action)) {
            input type="hidden" name="csrf" value=(viewer.csrf);
            label { "Pattern "
                input type="text" name="pattern" required value=(rule.map_or("", |r| r.pattern.as_str()))
                    placeholder="github.*, *.delete*, github.issues.create" size="28"
                    title=(PATTERN_HELP);
            }
            (action_select(rule.map(|r| r.action)))
            button type="submit" { (label) }
        }
    }
}

fn row(viewer: &Viewer, rule: &Policy, index: usize, count: usize) -> Markup {
    let base = format!("/console/policies/{}", rule.id);
    html! {
        tr {
            td { (index + 1) }
            td { code { (rule.pattern) } }
            td { span class={ "action " (rule.action.as_str()) } { (rule.action.as_str()) } }
            td { (rule_form(viewer, &base, Some(rule), "Save")) }
            td.order {
                @if index > 0 { (small_form(viewer, &format!("{base}/move"), "position", &(index - 1).to_string(), "Up", &rule.pattern)) }
                @if index + 1 < count { (small_form(viewer, &format!("{base}/move"), "position", &(index + 1).to_string(), "Down", &rule.pattern)) }
                (small_form(viewer, &format!("{base}/remove"), "", "", "Remove", &rule.pattern))
            }
        }
    }
}

fn small_form(
    viewer: &Viewer,
    action: &str,
    field: &str,
    value: &str,
    label: &str,
    what: &str,
) -> Markup {
    html! {
        form.inline method="post" action=(viewer.href(action)) {
            input type="hidden" name="csrf" value=(viewer.csrf);
            @if !field.is_empty() { input type="hidden" name=(field) value=(value); }
            button type="submit" aria-label={ (label) " " (what) } { (label) }
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct RuleForm {
    #[serde(default)]
    pattern: String,
    #[serde(default)]
    action: String,
}

pub(crate) async fn add(
    State(state): State<ConsoleState>,
    posted: Posted<RuleForm>,
) -> Result<Redirect, ConsoleError> {
    let Posted { viewer, form } = posted;
    state
        .ops
        .add_policy(
            &viewer.actor,
            NewPolicy {
                pattern: form.pattern,
                action: form.action,
                position: None,
            },
        )
        .await?;
    Ok(Redirect::to(&viewer.href("/console/policies")))
}

pub(crate) async fn update(
    State(state): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<RuleForm>,
) -> Result<Redirect, ConsoleError> {
    let Posted { viewer, form } = posted;
    state
        .ops
        .update_policy(&viewer.actor, &id, &form.pattern, &form.action)
        .await?;
    Ok(Redirect::to(&viewer.href("/console/policies")))
}

#[derive(Deserialize)]
pub(crate) struct MoveForm {
    #[serde(default)]
    position: String,
}

pub(crate) async fn move_rule(
    State(state): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<MoveForm>,
) -> Result<Redirect, ConsoleError> {
    let Posted { viewer, form } = posted;
    let position = form
        .position
        .parse::<i64>()
        .map_err(|_| ConsoleError::BadForm("the position must be a number".into()))?;
    state.ops.move_policy(&viewer.actor, &id, position).await?;
    Ok(Redirect::to(&viewer.href("/console/policies")))
}

pub(crate) async fn remove(
    State(state): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<crate::pages::clients::Nothing>,
) -> Result<Redirect, ConsoleError> {
    let viewer = posted.viewer;
    state.ops.remove_policy(&viewer.actor, &id).await?;
    Ok(Redirect::to(&viewer.href("/console/policies")))
}
