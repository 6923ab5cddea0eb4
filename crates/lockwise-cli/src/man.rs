//! `lockwise man [COMMAND…]`: a man page (roff) for lockwise or any subcommand at any depth
//! (`lockwise man queue work` is lockwise-queue-work(1)), with the sections clap_mangen
//! renders plus ENVIRONMENT (the variables the command reads) and EXAMPLES.

use std::process::ExitCode;

use clap::CommandFactory;
use roff::{Roff, bold, italic, roman};

use crate::exit;

/// Examples, by the command they run (`lockwise` plus the page's path): a page shows those
/// of its command and of the commands below it.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "lockwise lab",
        "Watch locks fail, and what fixes them, with real processes (file backend, no server).",
    ),
    (
        "lockwise run --key nightly-report -- ./report.sh",
        "Run a command under a lock in the per-user lock directory; it gets LOCKWISE_FENCING_TOKEN.",
    ),
    (
        "lockwise run --url redis://127.0.0.1:6379/ --key k --ttl 10s --wait 30s -- ./job.sh",
        "Wait up to 30 s for a Redis lock renewed every 10s/3; the command is stopped if the lock is lost.",
    ),
    (
        "lockwise partition --url redis://127.0.0.1:6379/ --group g --keys 12 -- ./work.sh",
        "Join group g and run ./work.sh over this member's share of keys 0..11 (LOCKWISE_KEYS).",
    ),
    (
        "lockwise members --url redis://127.0.0.1:6379/ --group g",
        "Show group g's generation and members.",
    ),
    (
        "lockwise queue migrate --url postgres://postgres@127.0.0.1/app",
        "Create or upgrade the queue's schema.",
    ),
    (
        "lockwise queue enqueue --url postgres://postgres@127.0.0.1/app --queue emails --payload '{\"to\":\"a@b.c\"}' --key welcome-42",
        "Add a job once: a second enqueue with the same key prints the same id.",
    ),
    (
        "lockwise queue work --url postgres://postgres@127.0.0.1/app --queue emails -- ./send.sh",
        "Run ./send.sh once per job, the payload on its stdin; exit 0 marks the job done.",
    ),
    (
        "lockwise queue stats --url postgres://postgres@127.0.0.1/app --queue emails",
        "Count the queue's jobs by state.",
    ),
    (
        "lockwise queue dead --url postgres://postgres@127.0.0.1/app --queue emails --json",
        "List dead letters, one JSON object a line.",
    ),
    (
        "lockwise queue list --url postgres://postgres@127.0.0.1/app --queue emails --state running",
        "List the jobs that run now.",
    ),
    (
        "lockwise queue show --url postgres://postgres@127.0.0.1/app 42",
        "Everything stored about job 42.",
    ),
    (
        "lockwise queue retry --url postgres://postgres@127.0.0.1/app 42",
        "Send dead job 42 back to ready.",
    ),
    (
        "lockwise queue cancel --url postgres://postgres@127.0.0.1/app 42",
        "Cancel job 42 if it has not finished.",
    ),
    (
        "lockwise queue purge --url postgres://postgres@127.0.0.1/app --older-than 30d",
        "Delete dead letters older than 30 days.",
    ),
    (
        "lockwise queue prune --url postgres://postgres@127.0.0.1/app --done --older-than 7d",
        "Delete done jobs older than 7 days.",
    ),
    (
        "lockwise bench lock",
        "Measure lock cycles against the raw round trips of each server that answers.",
    ),
    (
        "lockwise bench queue",
        "Measure queue throughput against the raw claim-and-complete floor.",
    ),
    (
        "lockwise completions bash > /etc/bash_completion.d/lockwise",
        "Install bash completion.",
    ),
    (
        "lockwise man queue work | man -l -",
        "Read this page for `lockwise queue work`.",
    ),
];

/// Variables every command reads, besides those of its options.
const COMMON_ENV: &[(&str, &str)] = &[(
    "LOCKWISE_LOG",
    "The log filter for stderr (tracing's EnvFilter syntax), e.g. warn, info or lockwise=debug; default warn.",
)];

/// `lockwise man [COMMAND…]`.
pub(crate) fn man(path: &[String]) -> ExitCode {
    let mut cli = crate::Cli::command();
    cli.build();
    let mut page = cli;
    for (depth, name) in path.iter().enumerate() {
        match page.find_subcommand(name).filter(|c| !c.is_hide_set()) {
            Some(sub) => page = sub.clone(),
            None => {
                eprintln!(
                    "lockwise: no subcommand {:?} in `lockwise {}`",
                    name,
                    path[..depth].join(" ")
                );
                return ExitCode::from(exit::USAGE);
            }
        }
    }
    let name = std::iter::once("lockwise")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>();
    let page = page
        .name(name.join("-"))
        .bin_name(name.join(" "))
        .version(crate::VERSION);
    let mut text = Vec::new();
    let rendered = render(&page, &name.join(" "), &mut text);
    crate::print_out(
        rendered.and_then(|()| std::io::Write::write_all(&mut std::io::stdout(), &text)),
    )
}

/// The page of `page` (run as `command`) into `w`.
fn render(page: &clap::Command, command: &str, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(page.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    if page.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(w)?;
    }
    if page.has_subcommands() {
        man.render_subcommands_section(w)?;
    }
    if page.get_after_help().is_some() || page.get_after_long_help().is_some() {
        man.render_extra_section(w)?;
    }
    let mut roff = Roff::new();
    roff.control("SH", ["ENVIRONMENT"]);
    for (var, help) in environment(page) {
        roff.control("TP", []).text([bold(var)]).text([roman(help)]);
    }
    roff.control("SH", ["EXAMPLES"]);
    let below = format!("{command} ");
    for (example, what) in EXAMPLES
        .iter()
        .filter(|(e, _)| command == "lockwise" || *e == command || e.starts_with(&below))
    {
        roff.control("TP", [])
            .text([bold(*example)])
            .text([roman(*what)]);
    }
    if !EXAMPLES
        .iter()
        .any(|(e, _)| *e == command || e.starts_with(&below))
        && command != "lockwise"
    {
        roff.text([
            roman("See "),
            italic("lockwise"),
            roman("(1) and "),
            bold("lockwise --help"),
            roman("."),
        ]);
    }
    roff.to_writer(w)?;
    man.render_version_section(w)
}

/// The environment variables `page` and its subcommands read (from their options' `env`),
/// each once, then [`COMMON_ENV`].
fn environment(page: &clap::Command) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    let mut pending = vec![page];
    while let Some(cmd) = pending.pop() {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(var) = arg.get_env().and_then(|v| v.to_str())
                && !found.iter().any(|(v, _)| v == var)
            {
                let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
                found.push((
                    var.to_owned(),
                    format!("As --{}: {help}", arg.get_long().unwrap_or(var)),
                ));
            }
        }
        pending.extend(cmd.get_subcommands().filter(|c| !c.is_hide_set()));
    }
    found.sort();
    found.extend(
        COMMON_ENV
            .iter()
            .map(|(v, h)| ((*v).to_owned(), (*h).to_owned())),
    );
    found
}
