//! Policies (SPEC §14, §9): the org's ordered rules — the first whose
//! pattern matches a tool decides — added, edited, moved and removed
//! here. A pattern is checked by the operations layer as it is saved; a
//! bad one is the form's error and nothing is stored.

use axum::extract::{Path, State};
use axum::response::{Redirect, Response};
use executor_ops::{NewPolicy, Policy};
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
    let rules = state.ops.list_policies(&viewer.actor).await?;
    let body = html! {
        p.lede { "Rules run top to bottom; the first whose pattern matches a tool decides. "
            "A tool no rule matches follows its default (calls that change things need approval)." }
        @if rules.is_empty() { p.empty { "No rule yet." } } @else {
            table {
                thead { tr { th scope="col" { "#" } th scope="col" { "Pattern" } th scope="col" { "Action" } th scope="col" { span.visually-hidden { "Edit" } } th scope="col" { span.visually-hidden { "Order" } } } }
                tbody { @for (i, rule) in rules.iter().enumerate() { (row(&viewer, rule, i, rules.len())) } }
            }
        }
        h2 { "Add a rule" }
        (rule_form(&viewer, "/console/policies", None, "Add"))
    };
    Ok(layout::page(&state, &viewer, Section::Policies, "Policies", body).await)
}

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
                    title="A tool address; * stands for one segment, a trailing .* for a subtree";
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
