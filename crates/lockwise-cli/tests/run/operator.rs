//! `lockwise locks` and `lockwise unlock --force` beside a `lockwise run` that holds the lock.

use super::terminal::exit_within;
use super::*;

fn lockwise_cmd(args: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args).env_remove("LOCKWISE_URL");
    c.output().expect("lockwise")
}

/// The holder is listed with its token, pid and command; `unlock --force` breaks its lock,
/// prints it, and the holder stops its command with 70; the next grant's token is higher.
pub(super) fn locks_lists_the_holder_and_unlock_force_breaks_it(b: Backend) {
    let (url, key) = (b.url(), b.key());
    let script = "echo started; echo $LOCKWISE_FENCING_TOKEN; exec sleep 30";
    let (mut holder, mut out) = spawn_holder(&b, &key, &["--ttl", "3s"], script);
    let token: u64 = wait_for_line(&mut out, Duration::from_secs(5), |_| true)
        .expect("the holder's token")
        .parse()
        .expect("a token");
    // PostgreSQL names a lock, and Redis tells its holder, once the holder's loss check has
    // seen it twice (within 40 ms).
    let give_up = Instant::now() + Duration::from_secs(3);
    let lines = loop {
        let listed = lockwise_cmd(&["locks", "--url", &url, "--prefix", &key, "--json"]);
        assert_eq!(code(&listed), 0, "{listed:?}");
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&listed.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        let told = |l: &serde_json::Value| {
            !l["holder"]["host"].is_null() || !l["holder"]["session"].is_null()
        };
        if lines.first().is_some_and(told) || Instant::now() > give_up {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(lines.len(), 1, "{lines:?}");
    let lock = &lines[0];
    assert_eq!(lock["key"], key.as_str(), "{lock}");
    assert_eq!(lock["token"], token, "{lock}");
    // The holder's pid and command where the backend keeps them (not MariaDB, not etcd).
    if !lock["holder"]["pid"].is_null() {
        assert_eq!(lock["holder"]["pid"], holder.id(), "{lock}");
        assert_eq!(lock["holder"]["name"], format!("sh -c {script}"), "{lock}");
    }
    let text = lockwise_cmd(&["locks", "--url", &url, "--prefix", &key]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.starts_with("KEY "), "{text}");
    assert!(text.contains(&token.to_string()), "{text}");

    let refused = lockwise_cmd(&["unlock", "--url", &url, "--key", &key]);
    assert_eq!(code(&refused), 64, "{refused:?}");
    let broken = lockwise_cmd(&["unlock", "--url", &url, "--key", &key, "--force", "--json"]);
    assert_eq!(code(&broken), 0, "{broken:?}");
    let broken: serde_json::Value = serde_json::from_slice(&broken.stdout).unwrap();
    assert_eq!(broken["broken"]["token"], token, "{broken}");
    // Told at its next check: at once on a server, at its next renewal (TTL/3) on a file.
    assert_eq!(
        exit_within(&mut holder, Duration::from_secs(3), &[]),
        Some(70)
    );
    let next = lockwise(
        &url,
        &key,
        &[],
        &["sh", "-c", "echo $LOCKWISE_FENCING_TOKEN"],
    )
    .output()
    .expect("run");
    assert_eq!(code(&next), 0, "{next:?}");
    let next: u64 = String::from_utf8_lossy(&next.stdout)
        .trim()
        .parse()
        .unwrap();
    assert!(next > token, "{next} after the broken {token}");
    let again = lockwise_cmd(&["unlock", "--url", &url, "--key", &key, "--force"]);
    assert_eq!(code(&again), 0, "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("was not held: nothing changed"),
        "{again:?}"
    );
}
