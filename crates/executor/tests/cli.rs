//! The command line as an operator types it: the real binary, a data dir of
//! its own, and what it prints.

use std::process::{Command, Output};

use tempfile::TempDir;

/// The binary on a fresh data dir, with `vars` set and nothing of the
/// caller's `EXECUTOR_*` environment.
fn executor(data: &TempDir, vars: &[(&str, &str)], args: &[&str]) -> Output {
    executor_in(data, std::path::Path::new("/"), vars, args)
}

/// [`executor`], run in the directory `cwd`.
fn executor_in(
    data: &TempDir,
    cwd: &std::path::Path,
    vars: &[(&str, &str)],
    args: &[&str],
) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_executor"));
    command.current_dir(cwd);
    for (name, _) in std::env::vars().filter(|(n, _)| n.starts_with("EXECUTOR_")) {
        command.env_remove(name);
    }
    command
        .env("EXECUTOR_DATA_DIR", data.path())
        .env("RUST_LOG", "error")
        .envs(vars.iter().copied())
        .args(args)
        .output()
        .expect("the binary runs")
}

/// A fresh data dir with one account, `email`, made by `token create`.
fn data_dir_of(email: &str) -> TempDir {
    let data = TempDir::new().expect("a temp dir");
    let token = executor(&data, &[], &["token", "create", "--email", email]);
    assert!(token.status.success(), "{}", stderr(&token));
    data
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Issue 37: `EXECUTOR_ALLOW_LOCAL_NETWORK=1` was refused ("possible values:
/// true, false"). A switch's variable reads 1/0, yes/no, on/off, true/false,
/// and means what it says: a spec on loopback is fetched (and fails to
/// connect) when allowed, and refused by the SSRF guard when not.
#[test]
fn a_switch_reads_its_variable_as_1_0_yes_no_on_off() {
    let data = data_dir_of("ops@example.com");
    // Port 9 (discard) is closed here: an allowed fetch fails to connect.
    let add = [
        "integrations",
        "add",
        "openapi",
        "--namespace",
        "x",
        "--spec",
    ];
    let spec = "http://127.0.0.1:9/openapi.json";
    for (value, allowed) in [
        ("1", true),
        ("yes", true),
        ("on", true),
        ("true", true),
        ("0", false),
        ("no", false),
        ("off", false),
        ("false", false),
    ] {
        let vars = [("EXECUTOR_ALLOW_LOCAL_NETWORK", value)];
        let out = executor(&data, &vars, &[add.as_slice(), &[spec]].concat());
        let text = stderr(&out);
        assert!(!out.status.success(), "nothing listens on port 9: {text}");
        assert!(!text.contains("invalid value"), "{value}: {text}");
        assert_eq!(
            !text.contains("on a local network"),
            allowed,
            "EXECUTOR_ALLOW_LOCAL_NETWORK={value}: {text}"
        );
    }
}

/// Issue 37: `integrations add … --namespace executor` was accepted, and its
/// tools were then unreachable behind the built-in ones. Every kind refuses
/// the reserved namespaces before it fetches or stores anything.
#[test]
fn a_namespace_that_shadows_the_built_in_tools_is_refused_at_add() {
    let data = data_dir_of("ops@example.com");
    let spec = write_spec(&data).to_string_lossy().into_owned();
    for namespace in ["executor", "search", "describe", "tools"] {
        for kind in [
            vec!["openapi", "--spec", spec.as_str()],
            vec!["graphql", "--endpoint", "http://127.0.0.1:9/graphql"],
            vec!["mcp", "--url", "http://127.0.0.1:9/mcp"],
        ] {
            let args = [
                &["integrations", "add"][..],
                &kind,
                &["--namespace", namespace],
            ]
            .concat();
            let out = executor(&data, &[], &args);
            let text = stderr(&out);
            assert!(
                !out.status.success(),
                "{namespace} via {}: accepted",
                kind[0]
            );
            assert!(
                text.contains("is reserved"),
                "{namespace} via {}: {text}",
                kind[0]
            );
        }
    }
    let listed = executor(&data, &[], &["integrations", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(
        listed.stdout.is_empty(),
        "nothing was stored: {:?}",
        String::from_utf8_lossy(&listed.stdout)
    );
    // A namespace that merely starts like one is an ordinary name.
    let out = executor(
        &data,
        &[],
        &[
            "integrations",
            "add",
            "openapi",
            "--spec",
            &spec,
            "--namespace",
            "executor_api",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A one-operation OpenAPI document in the data dir.
fn write_spec(data: &TempDir) -> std::path::PathBuf {
    let spec = data.path().join("spec.json");
    std::fs::write(
        &spec,
        r#"{"openapi":"3.0.0","info":{"title":"t","version":"1"},"paths":{"/a":{"get":{"operationId":"a","responses":{"200":{"description":"ok"}}}}}}"#,
    )
    .expect("the spec is written");
    spec
}

/// Issue 37: a relative `--spec` was stored as typed, so `refresh` from
/// another directory could not find it. The path is stored absolute.
#[test]
fn a_relative_spec_path_is_refreshed_from_any_directory() {
    let data = data_dir_of("ops@example.com");
    write_spec(&data);
    let add = [
        "integrations",
        "add",
        "openapi",
        "--spec",
        "spec.json",
        "--namespace",
        "api",
    ];
    let added = executor_in(&data, data.path(), &[], &add);
    assert!(added.status.success(), "{}", stderr(&added));
    let refreshed = executor(&data, &[], &["integrations", "refresh", "api"]);
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));
    let listed = executor(&data, &[], &["integrations", "list"]);
    let absolute = data.path().join("spec.json");
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains(absolute.to_string_lossy().as_ref()),
        "{}",
        String::from_utf8_lossy(&listed.stdout)
    );
}

/// Issue 37: after `token create --email you@…` and `integrations add`,
/// `executor call` acted for `local@localhost`, found nothing, and made a
/// second org, after which every catalog command asked for `--org`. Every
/// command now acts for the only org (by its owner), says which, and makes
/// no org of its own.
#[test]
fn the_cli_and_call_act_for_the_one_org_and_make_no_other() {
    let data = data_dir_of("you@example.com");
    let spec = write_spec(&data).to_string_lossy().into_owned();
    let add = executor(
        &data,
        &[],
        &[
            "integrations",
            "add",
            "openapi",
            "--spec",
            &spec,
            "--namespace",
            "api",
        ],
    );
    assert!(add.status.success(), "{}", stderr(&add));
    // The tool is found in that org: the call reaches it (and fails only
    // because the document names no server).
    let call = executor(&data, &[], &["call", "api.a.a", "{}"]);
    let said = stderr(&call);
    assert!(said.contains("acting in org you@example.com"), "{said}");
    let answer = String::from_utf8_lossy(&call.stdout);
    assert!(!answer.contains("tool_not_found"), "{answer}");
    // Still one org: catalog commands need no --org.
    let listed = executor(&data, &[], &["integrations", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(String::from_utf8_lossy(&listed.stdout).starts_with("api\t"));
    // Naming another org that does not exist is an error, not a new org.
    let named = executor(&data, &[], &["integrations", "list", "--org", "elsewhere"]);
    assert!(!named.status.success());
    assert!(
        stderr(&named).contains("no org named \"elsewhere\""),
        "{}",
        stderr(&named)
    );
}

/// Issue 37: a fresh data dir's first catalog command works without a
/// token: it acts for the local operator.
#[test]
fn a_fresh_data_dir_acts_for_the_local_operator() {
    let data = TempDir::new().expect("a temp dir");
    let listed = executor(&data, &[], &["integrations", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let call = executor(
        &data,
        &[],
        &["call", "executor.coreTools.policies.list", "{}"],
    );
    assert!(call.status.success(), "{}", stderr(&call));
    assert!(
        stderr(&call).contains("acting in org local@localhost"),
        "{}",
        stderr(&call)
    );
}

/// Issue 37: a port in use or a malformed `--listen` named neither the flag
/// nor the address ("Address already in use (os error 98)").
#[test]
fn a_listen_address_that_cannot_be_used_names_the_flag_and_the_address() {
    let data = TempDir::new().expect("a temp dir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("its address").to_string();
    for listen in [address.as_str(), "not-an-address"] {
        let out = executor(&data, &[], &["serve", "--listen", listen]);
        let text = stderr(&out);
        assert!(!out.status.success(), "{listen}: {text}");
        assert!(
            text.contains("--listen") && text.contains(listen),
            "{listen}: {text}"
        );
    }
}

/// Issue 37: the catalog, sessions and approvals from a shell, through the
/// same operations as the API: a tool described as agents read it, an
/// integration's tools, and what is not there named as such.
#[test]
fn tools_sessions_and_approvals_are_read_from_a_shell() {
    let data = data_dir_of("you@example.com");
    let spec = write_spec(&data).to_string_lossy().into_owned();
    let add = [
        "integrations",
        "add",
        "openapi",
        "--spec",
        &spec,
        "--namespace",
        "api",
    ];
    let added = executor(&data, &[], &add);
    assert!(added.status.success(), "{}", stderr(&added));
    let stdout = |out: &Output| String::from_utf8_lossy(&out.stdout).into_owned();

    let described = executor(&data, &[], &["tools", "describe", "api.a.a"]);
    assert!(described.status.success(), "{}", stderr(&described));
    let text = stdout(&described);
    assert!(text.starts_with("api.a.a\n"), "{text}");
    assert!(text.contains("requires approval by default: no"), "{text}");
    assert!(
        text.contains("\ntype Output = { ok: true; data: "),
        "{text}"
    );
    assert!(text.contains("\ntype ToolError = "), "{text}");

    let tools = executor(&data, &[], &["integrations", "tools", "api"]);
    assert!(tools.status.success(), "{}", stderr(&tools));
    assert!(
        stdout(&tools).starts_with("api.a.a\t-\t"),
        "{}",
        stdout(&tools)
    );

    for (args, said) in [
        (&["tools", "describe", "api.a.nothing"][..], "no tool"),
        (&["integrations", "tools", "nothing"][..], "no integration"),
        (
            &["sessions", "terminate", "no-such-session"][..],
            "no session",
        ),
    ] {
        let out = executor(&data, &[], args);
        assert!(!out.status.success(), "{args:?}: {}", stdout(&out));
        assert!(stderr(&out).contains(said), "{args:?}: {}", stderr(&out));
    }

    let sessions = executor(&data, &[], &["sessions", "list"]);
    assert!(sessions.status.success(), "{}", stderr(&sessions));
    assert!(stdout(&sessions).is_empty() && stderr(&sessions).contains("no sessions"));
    let approvals = executor(&data, &[], &["approvals", "list"]);
    assert!(approvals.status.success(), "{}", stderr(&approvals));
    assert!(
        stderr(&approvals).contains("no calls wait for a decision"),
        "{}",
        stderr(&approvals)
    );
}
