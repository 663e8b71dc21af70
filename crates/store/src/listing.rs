//! The keyset lists of executions and tool calls: a condition only for
//! each filter given, and the page bound as a row value,
//! `(started_at, id) < (…)`, so that the planner seeks the
//! `(org_id, started_at, id)` index to the page's first row instead of
//! scanning from the newest (a page a month back would read every row
//! after it). Parameters are numbered in order, each used once, in each
//! dialect's own spelling.

use crate::{ExecutionFilter, PageRequest, ToolCallFilter};

/// A parameter of a list query.
#[derive(Debug, Clone)]
pub(crate) enum Param {
    Text(String),
    Int(i64),
}

/// A list's `SELECT` and its parameters.
#[derive(Debug)]
pub(crate) struct ListQuery {
    pub(crate) sql: String,
    pub(crate) params: Vec<Param>,
}

/// Which SQL a list is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// A [`ListQuery`] being built from the filters present.
#[derive(Debug)]
struct Builder {
    dialect: Dialect,
    conditions: Vec<String>,
    params: Vec<Param>,
}

impl Builder {
    fn new(dialect: Dialect) -> Self {
        Builder {
            dialect,
            conditions: Vec::new(),
            params: Vec::new(),
        }
    }

    fn param(&mut self, value: Param) -> String {
        self.params.push(value);
        match self.dialect {
            Dialect::Sqlite => format!("?{}", self.params.len()),
            Dialect::Postgres => format!("${}", self.params.len()),
        }
    }

    fn text(&mut self, column: &str, value: Option<&str>) {
        if let Some(value) = value {
            let p = self.param(Param::Text(value.to_string()));
            self.conditions.push(format!("{column} = {p}"));
        }
    }

    /// `column` starts with `prefix`, byte for byte: on SQLite (which
    /// compares bytes) as a range; on Postgres with `starts_with`, which a
    /// database's collation cannot bend (a range would follow it).
    fn prefix(&mut self, column: &str, prefix: Option<&str>) {
        let Some(prefix) = prefix else { return };
        let low = self.param(Param::Text(prefix.to_string()));
        let condition = match (self.dialect, next_prefix(prefix)) {
            (Dialect::Postgres, _) => format!("starts_with({column}, {low})"),
            (Dialect::Sqlite, Some(upper)) => {
                let high = self.param(Param::Text(upper));
                format!("{column} >= {low} AND {column} < {high}")
            }
            // `?N` may stand twice.
            (Dialect::Sqlite, None) => format!("substr({column}, 1, length({low})) = {low}"),
        };
        self.conditions.push(condition);
    }

    /// `since` ≤ started_at < `until`, and past the previous page's last row.
    fn window(&mut self, since: Option<i64>, until: Option<i64>, page: &PageRequest) {
        if let Some(since) = since {
            let p = self.param(Param::Int(since));
            self.conditions.push(format!("started_at >= {p}"));
        }
        if let Some(until) = until {
            let p = self.param(Param::Int(until));
            self.conditions.push(format!("started_at < {p}"));
        }
        if let Some(after) = &page.after {
            let time = self.param(Param::Int(after.started_at_ms));
            let id = self.param(Param::Text(after.id.clone()));
            self.conditions
                .push(format!("(started_at, id) < ({time}, {id})"));
        }
    }

    /// The statement: `columns` of `table` under the conditions, newest
    /// first, at most the page's bound.
    fn select(mut self, columns: &str, table: &str, page: &PageRequest) -> ListQuery {
        let limit = self.param(Param::Int(i64::from(page.bounded_limit())));
        let filter = if self.conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.conditions.join(" AND "))
        };
        ListQuery {
            sql: format!(
                "SELECT {columns} FROM {table}{filter} ORDER BY started_at DESC, id DESC LIMIT {limit}"
            ),
            params: self.params,
        }
    }
}

/// The least string after every string that starts with `prefix`: its
/// last character moved up by one (None past the last character).
fn next_prefix(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    let last = chars.pop()?;
    let next = char::from_u32(u32::from(last) + 1)?;
    chars.push(next);
    Some(chars.into_iter().collect())
}

/// The executions list (an org's, or every org's).
pub(crate) fn executions(
    dialect: Dialect,
    columns: &str,
    org_id: Option<&str>,
    filter: &ExecutionFilter,
    page: &PageRequest,
) -> ListQuery {
    let mut q = Builder::new(dialect);
    q.text("org_id", org_id);
    q.text("status", filter.status.map(|s| s.as_str()));
    q.text("session_id", filter.session_id.as_deref());
    q.window(filter.since_ms, filter.until_ms, page);
    q.select(columns, "executions", page)
}

/// An org's tool calls.
pub(crate) fn tool_calls(
    dialect: Dialect,
    columns: &str,
    org_id: &str,
    filter: &ToolCallFilter,
    page: &PageRequest,
) -> ListQuery {
    let (exact, prefix) = filter.tool_match();
    let mut q = Builder::new(dialect);
    q.text("org_id", Some(org_id));
    q.text("tool_path", exact);
    q.prefix("tool_path", prefix);
    q.text("outcome", filter.outcome.map(|o| o.as_str()));
    q.text("session_id", filter.session_id.as_deref());
    q.text("execution_id", filter.execution_id.as_deref());
    q.window(filter.since_ms, filter.until_ms, page);
    q.select(columns, "tool_calls", page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PageKey;

    #[test]
    fn only_the_filters_given_become_conditions() {
        let q = executions(
            Dialect::Postgres,
            "id",
            Some("org_1"),
            &ExecutionFilter::default(),
            &PageRequest::first(50),
        );
        assert_eq!(
            q.sql,
            "SELECT id FROM executions WHERE org_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2"
        );
        let page = PageRequest {
            after: Some(PageKey {
                started_at_ms: 7,
                id: "x".into(),
            }),
            ..PageRequest::first(10)
        };
        let filter = ToolCallFilter {
            tool: Some("github.".into()),
            ..Default::default()
        };
        let q = tool_calls(Dialect::Sqlite, "id", "org_1", &filter, &page);
        assert_eq!(
            q.sql,
            "SELECT id FROM tool_calls WHERE org_id = ?1 AND tool_path >= ?2 AND tool_path < ?3 \
             AND (started_at, id) < (?4, ?5) ORDER BY started_at DESC, id DESC LIMIT ?6"
        );
        assert!(matches!(&q.params[2], Param::Text(t) if t == "github/"));
        let q = tool_calls(Dialect::Postgres, "id", "org_1", &filter, &page);
        assert_eq!(
            q.sql,
            "SELECT id FROM tool_calls WHERE org_id = $1 AND starts_with(tool_path, $2) \
             AND (started_at, id) < ($3, $4) ORDER BY started_at DESC, id DESC LIMIT $5"
        );
    }
}
