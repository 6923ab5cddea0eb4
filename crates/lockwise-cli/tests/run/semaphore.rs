//! `lockwise run --limit N`: at most N commands at once, each with its permit's fencing token;
//! a holder frozen past its lease loses its permit to a holder with a higher token.

use super::*;

use nix::sys::signal::{Signal, kill};

/// A holder of one of `limit` permits of `key` running `script`, and its first line that
/// starts with `prefix`.
fn permit_holder(
    b: &Backend,
    key: &str,
    extra: &[&str],
    script: &str,
    prefix: &str,
) -> (Child, String) {
    let mut child = lockwise(&b.url(), key, extra, &["sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn lockwise");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let line = wait_for_line(&mut out, Duration::from_secs(10), |l| l.starts_with(prefix))
        .expect("the holder's line");
    // Keep reading so that the command never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (child, line)
}

/// `permit SLOT KEY TOKEN`, as the commands below print it.
fn parse_permit(line: &str) -> (u32, String, u64) {
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(parts.len(), 4, "{line:?}");
    (
        parts[1].parse().expect("slot"),
        parts[2].to_owned(),
        parts[3].parse().expect("token"),
    )
}

const SHOW: &str = "echo \"permit $LOCKWISE_PERMIT $LOCKWISE_LOCK_KEY $LOCKWISE_FENCING_TOKEN\"";

/// Two holders take both permits; a third is refused (75) or waits and gets the permit the
/// first gives back, with a higher token; the limit's bounds are usage errors.
pub(super) fn limit_runs_at_most_n_commands_at_once(b: Backend) {
    let key = b.key();
    let busy = format!("trap 'exit 0' TERM; {SHOW}; while true; do sleep 0.05; done");
    let (mut first, line) = permit_holder(&b, &key, &["--limit", "2"], &busy, "permit ");
    let (slot1, key1, token1) = parse_permit(&line);
    let (mut second, line) = permit_holder(&b, &key, &["--limit", "2"], &busy, "permit ");
    let (slot2, key2, _) = parse_permit(&line);
    assert_ne!(slot1, slot2);
    assert_eq!(key1, format!("{key}#permit-{slot1}"));
    assert_eq!(key2, format!("{key}#permit-{slot2}"));

    let refused = lockwise(&b.url(), &key, &["--limit", "2"], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&refused), 75, "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("all 2 permits"),
        "{refused:?}"
    );

    let waiter = lockwise(
        &b.url(),
        &key,
        &["--limit", "2", "--wait", "10s"],
        &["sh", "-c", SHOW],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn");
    std::thread::sleep(Duration::from_millis(500));
    kill(Pid::from_raw(first.id() as i32), Signal::SIGTERM).expect("SIGTERM");
    assert_eq!(first.wait().expect("first").code(), Some(0));
    let out = waiter.wait_with_output().expect("waiter");
    assert_eq!(code(&out), 0, "{out:?}");
    let (slot3, key3, token3) = parse_permit(String::from_utf8_lossy(&out.stdout).trim());
    assert_eq!((slot3, &key3), (slot1, &key1), "the freed permit");
    assert!(token3 > token1, "{token3} after {token1}");

    kill(Pid::from_raw(second.id() as i32), Signal::SIGTERM).expect("SIGTERM");
    assert_eq!(second.wait().expect("second").code(), Some(0));
    for limit in ["0", "1025", "two"] {
        let out = lockwise(&b.url(), &key, &["--limit", limit], &["true"])
            .output()
            .expect("run");
        assert_eq!(code(&out), 64, "--limit {limit}: {out:?}");
    }
    // A plain lock's command does not see a permit, not even one lockwise inherited.
    let out = lockwise(
        &b.url(),
        &key,
        &[],
        &["sh", "-c", "echo \"[${LOCKWISE_PERMIT-unset}]\""],
    )
    .env("LOCKWISE_PERMIT", "7")
    .output()
    .expect("run");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "[unset]\n", "{out:?}");
}

/// RELIABILITY (issue 36): a permit holder frozen (SIGSTOP) past its TTL, three rounds. Its
/// permit goes to the next holder of its slot with a higher token; a PostgreSQL fence on the
/// permit's key accepts the new holder's write and refuses the frozen holder's token; resumed,
/// the frozen holder exits 70 and its late release leaves the new permit held. The other
/// permit's holder runs through it all.
pub(super) fn a_frozen_permit_holder_is_fenced(b: Backend) {
    let key = b.key();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let schema = lockwise_testkit::PgSchema::new("permit_fence");
    let pool = rt
        .block_on(sqlx::PgPool::connect(schema.url()))
        .expect("PostgreSQL is not reachable; run scripts/services");
    let store = lockwise::postgres::Store::with_schema(pool.clone(), schema.name()).expect("store");
    let locker = rt
        .block_on(lockwise::Locker::connect(&b.url()))
        .expect("connect");
    let semaphore = lockwise::Semaphore::new(locker, key.clone(), 2).expect("semaphore");
    let hold = format!("{SHOW}; exec sleep 600");
    let (mut other, _) =
        permit_holder(&b, &key, &["--limit", "2", "--ttl", "1s"], &hold, "permit ");
    let (mut refused, mut frozen_rounds) = (0, 0);
    for round in 0..3 {
        // No command: lockwise holds the permit itself and prints its token.
        let mut holder = Command::new(BIN);
        holder
            .args([
                "run",
                "--url",
                &b.url(),
                "--key",
                &key,
                "--limit",
                "2",
                "--ttl",
                "1s",
                "-v",
            ])
            .env_remove("LOCKWISE_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut holder = holder.spawn().expect("spawn");
        let mut out = BufReader::new(holder.stdout.take().expect("stdout"));
        let token: u64 = wait_for_line(&mut out, Duration::from_secs(10), |_| true)
            .expect("the token")
            .trim()
            .parse()
            .expect("a token");
        let mut err = BufReader::new(holder.stderr.take().expect("stderr"));
        let said = wait_for_line(&mut err, Duration::from_secs(5), |l| l.contains("acquired"))
            .expect("the verbose line");
        let held = said.split('"').nth(1).expect("the permit's key").to_owned();

        kill(Pid::from_raw(holder.id() as i32), Signal::SIGSTOP).expect("SIGSTOP");
        frozen_rounds += 1;
        let frozen_at = Instant::now();
        let opts =
            lockwise::LockOptions::ttl(Duration::from_secs(10)).wait(Duration::from_secs(10));
        let next = rt
            .block_on(semaphore.acquire(&opts))
            .expect("the frozen holder's permit");
        let took = frozen_at.elapsed();
        assert_eq!(next.key(), held, "round {round}: the frozen holder's slot");
        assert!(
            next.token().get() > token,
            "round {round}: {} after {token}",
            next.token()
        );
        assert!(
            took < Duration::from_secs(4),
            "granted {took:?} after the freeze"
        );

        rt.block_on(async {
            let mut tx = pool.begin().await.expect("begin");
            store
                .fence(&mut tx, next.key(), next.token())
                .await
                .expect("the new holder's write");
            tx.commit().await.expect("commit");
            let mut tx = pool.begin().await.expect("begin");
            let late = store
                .fence(&mut tx, &held, lockwise::FencingToken::new(token))
                .await;
            assert!(
                matches!(late, Err(lockwise::Error::StaleToken { .. })),
                "{late:?}"
            );
            refused += 1;
        });

        kill(Pid::from_raw(holder.id() as i32), Signal::SIGCONT).expect("SIGCONT");
        assert_eq!(
            exit_within(&mut holder, Duration::from_secs(5), &[]),
            Some(70)
        );
        assert!(
            rt.block_on(next.is_held()).expect("is_held"),
            "the new permit survives"
        );
        assert!(rt.block_on(next.release()).expect("release"));
    }
    assert_eq!(
        (frozen_rounds, refused),
        (3, 3),
        "faults injected and refused"
    );
    assert!(
        other.try_wait().expect("wait").is_none(),
        "the other holder runs on"
    );
    kill(Pid::from_raw(other.id() as i32), Signal::SIGTERM).expect("SIGTERM");
    assert!(exit_within(&mut other, Duration::from_secs(5), &[]).is_some());
}

/// `--shared` and `--exclusive`: readers run together; a writer is refused (75) while they
/// read, and one that waits keeps new readers out, then runs once they are gone, with the
/// writers' lock's key and token; conflicting flags are usage errors.
pub(super) fn shared_readers_and_an_exclusive_writer(b: Backend) {
    let key = b.key();
    let busy = format!("trap 'exit 0' TERM; {SHOW}; while true; do sleep 0.05; done");
    let shared = ["--shared", "--max-readers", "4"];
    let (mut r1, line1) = permit_holder(&b, &key, &shared, &busy, "permit ");
    let (mut r2, line2) = permit_holder(&b, &key, &shared, &busy, "permit ");
    let ((s1, k1, _), (s2, _, _)) = (parse_permit(&line1), parse_permit(&line2));
    assert_ne!(s1, s2, "two readers, two slots");
    assert_eq!(k1, format!("{key}#rw-readers#permit-{s1}"));
    let refused = lockwise(
        &b.url(),
        &key,
        &["--exclusive", "--max-readers", "4"],
        &["true"],
    )
    .output()
    .expect("run");
    assert_eq!(
        code(&refused),
        75,
        "a writer while readers read: {refused:?}"
    );

    let writer = lockwise(
        &b.url(),
        &key,
        &["--exclusive", "--max-readers", "4", "--wait", "10s"],
        &[
            "sh",
            "-c",
            "echo \"w $LOCKWISE_LOCK_KEY $LOCKWISE_FENCING_TOKEN\"",
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn");
    std::thread::sleep(Duration::from_millis(700));
    let kept_out = lockwise(&b.url(), &key, &shared, &["true"])
        .output()
        .expect("run");
    assert_eq!(
        code(&kept_out),
        75,
        "a reader past a waiting writer: {kept_out:?}"
    );
    for reader in [&mut r1, &mut r2] {
        kill(Pid::from_raw(reader.id() as i32), Signal::SIGTERM).expect("SIGTERM");
        assert_eq!(reader.wait().expect("reader").code(), Some(0));
    }
    let out = writer.wait_with_output().expect("writer");
    assert_eq!(code(&out), 0, "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with(&format!("w {key}#rw-writer ")), "{said:?}");
    let readers_again = lockwise(&b.url(), &key, &shared, &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&readers_again), 0, "{readers_again:?}");
    for bad in [
        &["--shared", "--exclusive"][..],
        &["--shared", "--limit", "2"],
        &["--max-readers", "2"],
        &["--shared", "--max-readers", "0"],
    ] {
        let out = lockwise(&b.url(), &key, bad, &["true"])
            .output()
            .expect("run");
        assert_eq!(code(&out), 64, "{bad:?}: {out:?}");
    }
}
