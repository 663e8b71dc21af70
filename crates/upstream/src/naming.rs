//! Tool names as agents call them: an upstream's names normalised to the
//! catalog's alphabet, each still mapped to the name the upstream knows.

use std::collections::HashSet;

/// `name` in lower case with every run of other characters than ASCII
/// letters and digits made one `_`, trimmed of `_`; "tool" when nothing is
/// left. `Get-Sum` → `get_sum`, `repo/list issues` → `repo_list_issues`.
pub fn normalise(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut gap = false;
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() {
            if gap && !out.is_empty() {
                out.push('_');
            }
            gap = false;
            out.push(c.to_ascii_lowercase());
        } else {
            gap = true;
        }
    }
    if out.is_empty() {
        out.push_str("tool");
    }
    out
}

/// The names of `names` as the catalog lists them, in the same order:
/// normalised, and the second and later of a clash made `_2`, `_3`… (the
/// upstream's order decides which keeps the plain name).
pub fn catalog_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut taken = HashSet::new();
    names
        .into_iter()
        .map(|name| {
            let base = normalise(name);
            let mut candidate = base.clone();
            let mut n = 2;
            while !taken.insert(candidate.clone()) {
                candidate = format!("{base}_{n}");
                n += 1;
            }
            candidate
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lowercased_and_runs_of_other_characters_become_one_underscore() {
        assert_eq!(normalise("get-sum"), "get_sum");
        assert_eq!(
            normalise("Trigger-Long-Running-Operation"),
            "trigger_long_running_operation"
        );
        assert_eq!(normalise("  repo/list  issues!! "), "repo_list_issues");
        assert_eq!(normalise("__x__"), "x");
        assert_eq!(normalise("---"), "tool");
        assert_eq!(normalise("héllo"), "h_llo");
    }

    #[test]
    fn clashes_get_numbered_in_the_upstreams_order() {
        let names = catalog_names(["Echo", "echo", "e-cho", "ECHO", "echo_2"]);
        assert_eq!(names, ["echo", "echo_2", "e_cho", "echo_3", "echo_2_2"]);
    }
}
