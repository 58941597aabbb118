//! What the servers' own logs say went wrong during a schedule: ZooKeeper's digest check (a
//! replica whose tree disagrees with the digest a txn carries, Java 3.6+ and zkfle alike), and
//! the signatures of known Java bugs, so that a schedule's evidence names its JIRA.
//!
//! Pure: the campaign hands in each voter's output since the schedule began.

/// At most this many lines of one kind are kept per server (a diverged Java replica logs an
/// error for every txn it replays after the first out-of-order one); the rest are counted.
pub const MAX_LINES: usize = 5;

/// A known bug's signature found in a server's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownBug {
    /// The JIRA id, or `None` for a symptom that several bugs share.
    pub jira: Option<&'static str>,
    /// A short name: the JIRA id, or the symptom's.
    pub name: &'static str,
    /// What it is, for the report.
    pub what: &'static str,
    /// The first line that showed it.
    pub line: String,
    /// Lines that showed it.
    pub count: usize,
}

/// What one server's log says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LogFindings {
    /// Lines in which its digest check failed (the first [`MAX_LINES`]).
    pub digest_mismatches: Vec<String>,
    /// Digest-check lines, all of them.
    pub digest_lines: usize,
    pub known_bugs: Vec<KnownBug>,
}

struct Signature {
    jira: Option<&'static str>,
    name: &'static str,
    what: &'static str,
    /// Whether `line` (with the line after it, where a stack trace's first frame is) shows it.
    shows: fn(line: &str, next: &str) -> bool,
}

const SIGNATURES: &[Signature] = &[
    Signature {
        jira: Some("ZOOKEEPER-4394"),
        name: "ZOOKEEPER-4394",
        what: "a follower's sync threw NullPointerException in Learner.syncWithLeader (a COMMIT \
               after NEWLEADER for a proposal it had already logged): its sync starts over from \
               its tree's zxid, so its log can hold the DIFF's txns twice",
        shows: |line, next| {
            line.contains("NullPointerException")
                && (line.contains("\"pif\" is null") || next.contains("Learner.syncWithLeader"))
        },
    },
    Signature {
        jira: Some("ZOOKEEPER-4409"),
        name: "ZOOKEEPER-4409",
        what: "SendAckRequestProcessor threw NullPointerException on the closed leader socket \
               and the follower's SyncThread exited ('Severe unrecoverable error')",
        shows: |line, next| {
            line.contains("NullPointerException")
                && (line.contains("learner.sock") || next.contains("SendAckRequestProcessor"))
        },
    },
    Signature {
        jira: None,
        name: "txn log out of order",
        what: "its txn log replayed a txn older than one before it (the same txns logged twice): \
               Java applies them again on restart (FileTxnSnapLog '(highestZxid) > (next log)')",
        shows: |line, _| line.contains("(highestZxid) >") && line.contains("(next log)"),
    },
];

/// Whether a log line is a digest check failing (Java's `First digest mismatch on txn` and its
/// rate-limited `Digests are not matching`, zkfle's `First digest mismatch on txn`).
pub fn is_digest_mismatch(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    l.contains("digest mismatch") || l.contains("digests are not matching")
}

/// Reads one server's log.
pub fn scan(log: &str) -> LogFindings {
    let mut f = LogFindings::default();
    let lines: Vec<&str> = log.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim();
        if is_digest_mismatch(line) {
            f.digest_lines += 1;
            if f.digest_mismatches.len() < MAX_LINES {
                f.digest_mismatches.push(line.to_string());
            }
        }
        let next = lines.get(i + 1).copied().unwrap_or("");
        for sig in SIGNATURES {
            if !(sig.shows)(line, next) {
                continue;
            }
            match f.known_bugs.iter_mut().find(|k| k.what == sig.what) {
                Some(k) => k.count += 1,
                None => f.known_bugs.push(KnownBug {
                    jira: sig.jira,
                    name: sig.name,
                    what: sig.what,
                    line: line.to_string(),
                    count: 1,
                }),
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    // A Java 3.8.0 follower in a campaign's rolling restart (docker logs, timestamps cut).
    const JAVA_380: &str = "\
2026-12-07 16:40:25,725 [myid:2] - WARN  [QuorumPeer[myid=2](plain=0.0.0.0:2181)(secure=disabled):Follower@128] - Exception when following the leader
java.lang.NullPointerException: Cannot read field \"hdr\" because \"pif\" is null
\tat org.apache.zookeeper.server.quorum.Learner.syncWithLeader(Learner.java:655)
\tat org.apache.zookeeper.server.quorum.Follower.followLeader(Follower.java:108)
2026-12-07 16:40:25,849 [myid:2] - ERROR [SyncThread:2:ZooKeeperCriticalThread@49] - Severe unrecoverable error, from thread : SyncThread:2
java.lang.NullPointerException: Cannot invoke \"java.net.Socket.isClosed()\" because \"this.learner.sock\" is null
\tat org.apache.zookeeper.server.quorum.SendAckRequestProcessor.flush(SendAckRequestProcessor.java:64)
2026-12-07 16:40:45,043 [myid:2] - ERROR [main:FileTxnSnapLog@345] - 42949673957(highestZxid) > 34359744288(next log) for type 5
2026-12-07 16:40:45,043 [myid:2] - WARN  [main:RateLogger@87] - Message:Digests are not matching. Value is Zxid. Value:34359744288
2026-12-07 16:40:45,045 [myid:2] - ERROR [main:DataTree@1818] - First digest mismatch on txn: 72057645893156871,782,34359744288,1796661620363,5
2026-12-07 16:40:45,046 [myid:2] - ERROR [main:FileTxnSnapLog@345] - 42949673957(highestZxid) > 34359744289(next log) for type -1
2026-12-07 16:40:45,047 [myid:2] - WARN  [main:RateLogger@57] - [6 times] Message: Digests are not matching. Value is Zxid. Last value:42949672967
";

    #[test]
    fn a_java_follower_s_double_logged_diff_is_named() {
        let f = scan(JAVA_380);
        assert_eq!(f.digest_lines, 3);
        assert!(f.digest_mismatches[1].contains("First digest mismatch on txn"));
        let jiras: Vec<_> = f.known_bugs.iter().map(|k| (k.jira, k.count)).collect();
        assert_eq!(
            jiras,
            [
                (Some("ZOOKEEPER-4394"), 1),
                (Some("ZOOKEEPER-4409"), 1),
                (None, 2)
            ]
        );
        assert!(f.known_bugs[0].line.contains("\"pif\" is null"));
    }

    #[test]
    fn zkfle_s_digest_check_counts_and_other_lines_do_not() {
        let log = "2026-12-06T10:00:01.123Z ERROR zkfle::storage::tree: First digest mismatch on txn 0x800000072f (setData): expected digest 1, actual digest 2\n\
                   2026-12-06 10:00:00,000 [myid:1] - INFO  [main:ZooKeeperServer@153] - zookeeper.digest.enabled = true\n\
                   2026-12-06 10:00:00,000 [myid:1] - INFO  [main:DataTree@1716] - The digest in the snapshot has digest version of 2\n";
        let f = scan(log);
        assert_eq!(f.digest_lines, 1);
        assert!(f.known_bugs.is_empty());
    }

    #[test]
    fn lines_kept_are_bounded() {
        let log = "Digests are not matching. Value is Zxid.\n".repeat(1000);
        let f = scan(&log);
        assert_eq!(
            (f.digest_mismatches.len(), f.digest_lines),
            (MAX_LINES, 1000)
        );
    }
}
