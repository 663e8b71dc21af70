//! `executor executions …` and `executor resume`: execution history, and
//! a paused execution decided from a shell.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use executor_ops::{ActorChoice, CallResult, ListExecutions, Operations, PageAsk};

use super::readable_time;
use super::tools::print_result;
use crate::AnyResult;
use crate::cli::ExecutionsCommand;

pub(crate) async fn executions(ops: &Operations, command: ExecutionsCommand) -> AnyResult<()> {
    match command {
        ExecutionsCommand::List {
            limit,
            org,
            status,
            since,
        } => {
            let org_id = match &org {
                Some(name) => {
                    let choice = ActorChoice {
                        email: None,
                        org: Some(name.clone()),
                    };
                    Some(ops.resolve_actor(&choice).await?.org_id)
                }
                None => None,
            };
            let query = ListExecutions {
                status,
                since_ms: since.as_deref().map(since_ms).transpose()?,
                page: PageAsk {
                    limit,
                    cursor: None,
                },
                ..ListExecutions::default()
            };
            let listed = ops.list_executions(org_id.as_deref(), &query).await?;
            let names = ops.store().list_orgs().await?;
            let org_name = |id: &str| {
                names
                    .iter()
                    .find(|(org, _)| org == id)
                    .map_or(id.to_string(), |(_, name)| name.clone())
            };
            if listed.items.is_empty() {
                eprintln!("no executions match");
            }
            for x in listed.items {
                // The first three columns are as they were (scripts read
                // them); the time and org follow.
                println!(
                    "{}\t{}\t{} ms\t{}\t{}\t{}",
                    x.id,
                    x.status,
                    x.duration_ms,
                    readable_time(x.started_at_ms),
                    org_name(&x.org_id),
                    x.code_preview
                );
            }
            Ok(())
        }
        ExecutionsCommand::Show { id } => {
            let x = ops.get_execution(None, &id).await?;
            println!("{}", serde_json::to_string_pretty(&x)?);
            Ok(())
        }
    }
}

/// `--since`: a duration back from now (`90s`, `30m`, `2h`, `7d`), an RFC
/// 3339 time, or a date (midnight UTC).
fn since_ms(text: &str) -> AnyResult<i64> {
    let text = text.trim();
    let unit = |c: char| match c {
        's' => Some(1_000),
        'm' => Some(60_000),
        'h' => Some(3_600_000),
        'd' => Some(86_400_000),
        _ => None,
    };
    if let Some(last) = text.chars().last()
        && let Some(per) = unit(last)
        && let Ok(n) = text[..text.len() - 1].parse::<i64>()
    {
        return Ok(Utc::now().timestamp_millis() - n.saturating_mul(per));
    }
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(time.timestamp_millis());
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d")
        && let Some(midnight) = day.and_hms_opt(0, 0, 0)
    {
        return Ok(midnight.and_utc().timestamp_millis());
    }
    Err(format!(
        "--since {text:?} is neither a duration (30m, 2h, 7d) nor a date (2026-12-06, \
         2026-12-06T10:00:00Z)"
    )
    .into())
}

/// Posts the decision for the server holding the run, and prints the
/// outcome; with no server taking it within `wait` seconds, replays the
/// run here and applies it.
pub(crate) async fn resume(
    ops: &Operations,
    execution_id: &str,
    action: &str,
    wait: u64,
) -> AnyResult<()> {
    let result: CallResult = ops
        .resume_execution(
            None,
            execution_id,
            action,
            Duration::from_secs(wait),
            executor_store::ApprovalChannel::Cli,
        )
        .await?;
    print_result(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_reads_durations_times_and_dates() {
        let now = Utc::now().timestamp_millis();
        let two_hours = since_ms("2h").unwrap();
        assert!((now - 7_200_000 - two_hours).abs() < 5_000);
        assert_eq!(since_ms("2026-12-06").unwrap(), 1_796_515_200_000);
        assert_eq!(since_ms("2026-12-06T00:00:01Z").unwrap(), 1_796_515_201_000);
        assert!(since_ms("yesterday").is_err());
        assert_eq!(readable_time(1_796_515_201_000), "2026-12-06 00:00:01 UTC");
    }
}
