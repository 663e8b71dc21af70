//! What an operation's method and path say about it, for search.
//!
//! Large APIs name and describe operations unevenly (Microsoft Graph
//! summarises `GET /me/messages` as "Get open extension"), but the route is
//! always right: the method is the verb and the path's segments name the
//! resource. [`route_hint`] turns them into words search can match.

use executor_catalog::RouteHint;
use executor_catalog::search::{IRREGULAR_PLURALS, for_each_term};

/// The verb and the resource words of `method path_template`:
/// `GET /me/messages` gives "list me messages", `GET /me/drive` (one
/// resource, named in the singular) "get me drive", `DELETE
/// /me/messages/{message-id}` "delete me messages", `PUT` (which adds or
/// replaces) "set …", `POST /me/microsoft.graph.sendMail` "me sendMail"
/// (an action names its own verb). A `GET` whose operation `name` says
/// "list" or "get" takes that word: the API's authors know whether
/// `/users/{id}/memberOf` is a collection, where the path's grammar guesses.
pub(crate) fn route_hint(method: &str, path_template: &str, name: &str) -> RouteHint {
    // Every tool of a large API comes through here: no Vec, no lowercase
    // copy of the method.
    let all = || path_template.split('/').filter(|s| !s.is_empty());
    // OData's `$ref` is the link to a resource, not one more resource:
    // `POST /groups/{id}/members/$ref` adds a member.
    let segments = || all().filter(|s| *s != "$ref");
    let last = segments().next_back().unwrap_or("");
    let is_action = last.contains('.');
    let on_member = is_parameter(last);
    let is = |word: &str| method.eq_ignore_ascii_case(word);
    let verb = if is("get") || is("head") {
        match named_read_verb(name) {
            Some(named) => named,
            None if on_member || (!is_action && names_one(last)) => "get",
            None => "list",
        }
    } else if is("post") {
        if is_action { "" } else { "create" }
    } else if is("put") {
        "set"
    } else if is("patch") {
        "update"
    } else if is("delete") {
        "delete"
    } else {
        ""
    };
    let mut words = String::with_capacity(verb.len() + path_template.len());
    words.push_str(verb);
    for segment in segments().filter(|s| !is_parameter(s)) {
        if !words.is_empty() {
            words.push(' ');
        }
        words.push_str(resource_word(segment));
    }
    RouteHint {
        words,
        depth: u8::try_from(all().count()).unwrap_or(u8::MAX),
    }
}

/// The first of "list" and "get" among the words of an operation name's
/// last part (`usersListMemberOf`, `repos.listForOrg`, `meGetDrive`).
fn named_read_verb(name: &str) -> Option<&'static str> {
    let last = name.rsplit('.').next().unwrap_or(name);
    let mut named = None;
    for_each_term(last, &mut |word| {
        named = named.or(match word {
            "list" => Some("list"),
            "get" => Some("get"),
            _ => None,
        });
    });
    named
}

/// Whether a path segment names one resource rather than a collection: a
/// singular noun (`/me/drive`, `/repos/{owner}/{repo}/readme`), where
/// collections are plural (`/me/drives`, `/items/{id}/children`). "status"
/// and "access" are singular too.
fn names_one(segment: &str) -> bool {
    if IRREGULAR_PLURALS
        .iter()
        .any(|(many, _)| ends_with_ignore_case(segment, many))
    {
        return false;
    }
    let ends_with = |suffix: &str| ends_with_ignore_case(segment, suffix);
    !segment.is_empty() && (!ends_with("s") || ends_with("ss") || ends_with("us"))
}

fn ends_with_ignore_case(text: &str, suffix: &str) -> bool {
    text.len()
        .checked_sub(suffix.len())
        .and_then(|start| text.get(start..))
        .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
}

/// `{id}`, or a segment that holds one with other text (`{name}.json`).
fn is_parameter(segment: &str) -> bool {
    segment.starts_with('{') || segment.starts_with(':')
}

/// The name in a segment: an OData action or function is qualified by its
/// namespace and may carry its arguments (`microsoft.graph.search(q='{q}')`
/// is `search`); `$value` is the content.
fn resource_word(segment: &str) -> &str {
    // OData's `$value` is the raw content of the media resource it
    // follows: `GET /me/photo/$value` downloads the photo.
    if segment == "$value" {
        return "content";
    }
    let name = segment.split('(').next().unwrap_or(segment);
    name.rsplit('.').next().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(method: &str, path: &str) -> (String, u8) {
        let RouteHint { words, depth } = route_hint(method, path, "");
        (words, depth)
    }

    #[test]
    fn the_method_is_the_verb_and_the_segments_the_resource() {
        assert_eq!(hint("GET", "/me/messages"), ("list me messages".into(), 2));
        assert_eq!(
            hint("GET", "/me/messages/{message-id}"),
            ("get me messages".into(), 3)
        );
        assert_eq!(
            hint("POST", "/repos/{owner}/{repo}/forks"),
            ("create repos forks".into(), 4)
        );
        assert_eq!(hint("PATCH", "/me"), ("update me".into(), 1));
        assert_eq!(hint("PUT", "/a/{b}"), ("set a".into(), 2));
        assert_eq!(hint("DELETE", "/a/{b}"), ("delete a".into(), 2));
    }

    #[test]
    fn a_singular_last_segment_is_one_resource() {
        assert_eq!(hint("GET", "/me/drive"), ("get me drive".into(), 2));
        assert_eq!(
            hint("GET", "/repos/{owner}/{repo}/readme"),
            ("get repos readme".into(), 4)
        );
        assert_eq!(hint("GET", "/me/drives"), ("list me drives".into(), 2));
        assert_eq!(
            hint("GET", "/items/{item-id}/children"),
            ("list items children".into(), 3)
        );
        assert_eq!(
            hint("GET", "/repos/{owner}/{repo}/commits/{ref}/status"),
            ("get repos commits status".into(), 6)
        );
    }

    #[test]
    fn a_get_takes_list_or_get_from_the_operation_name() {
        let named = |method, path, name| route_hint(method, path, name).words;
        // `/memberOf` reads as one thing; the API says it lists.
        assert_eq!(
            named(
                "GET",
                "/users/{id}/memberOf",
                "usersDirectoryObject.usersListMemberOf"
            ),
            "list users memberOf"
        );
        assert_eq!(
            named("GET", "/users/{id}/memberOf", ""),
            "get users memberOf"
        );
        assert_eq!(
            named("GET", "/me/drives", "meDrive.meGetDrives"),
            "get me drives"
        );
        assert_eq!(
            named("GET", "/orgs/{org}/repos", "repos.listForOrg"),
            "list orgs repos"
        );
        // A name without either word, or another method, changes nothing.
        assert_eq!(
            named(
                "GET",
                "/user/starred/{o}/{r}",
                "activity.checkRepoIsStarredByAuthenticatedUser"
            ),
            "get user starred"
        );
        assert_eq!(named("DELETE", "/a/{b}", "a.getRidOf"), "delete a");
    }

    #[test]
    fn an_odata_ref_is_the_resource_it_links() {
        assert_eq!(
            hint("POST", "/groups/{group-id}/members/$ref"),
            ("create groups members".into(), 4)
        );
        assert_eq!(
            hint("GET", "/groups/{group-id}/members/$ref"),
            ("list groups members".into(), 4)
        );
        assert_eq!(
            hint("DELETE", "/groups/{group-id}/members/{member-id}/$ref"),
            ("delete groups members".into(), 5)
        );
    }

    #[test]
    fn an_odata_value_is_the_content() {
        assert_eq!(
            hint("GET", "/users/{user-id}/photo/$value"),
            ("get users photo content".into(), 4)
        );
        assert_eq!(
            hint("PUT", "/me/photo/$value"),
            ("set me photo content".into(), 3)
        );
    }

    #[test]
    fn actions_and_functions_name_their_own_verb() {
        assert_eq!(
            hint("POST", "/me/microsoft.graph.sendMail"),
            ("me sendMail".into(), 2)
        );
        assert_eq!(
            hint("GET", "/drives/{drive-id}/microsoft.graph.search(q='{q}')"),
            ("list drives search".into(), 3)
        );
    }
}
