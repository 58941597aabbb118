//! Conformance campaigns: a workload's history and the checks of what ZooKeeper promises
//! (`zkfle chaos check`).
//!
//! - [`history`]: the recorded history, zkfle's JSON lines or Jepsen's cas-register log, read
//!   with every line bounded and every fault named by its line.
//! - [`linearizable`]: Wing & Gong's search with Lowe's memoisation, over any model.
//! - [`check`]: ZooKeeper's promises checked on a history: linearizable writes, sequentially
//!   consistent sessions, sync reads apart, no acknowledged write lost, replicas that agree.
//! - [`workload`]: the I/O side: client sessions against a live ensemble, recorded as a
//!   history as they run (`zkfle chaos run`).
//! - [`nemesis`]: a schedule's faults drawn from its seed, pure; [`docker`]: the campaign's
//!   ensemble in Docker and the nemesis's hands on it; [`campaign`]: schedules run one after
//!   another, healed, read and checked (`zkfle chaos campaign`); [`safety`]: one leader per
//!   epoch and each election's time, from the campaign's capture decoded by zkfle;
//!   [`server_logs`]: what the servers' own logs say (their digest check, known Java bugs).
pub mod campaign;
pub mod check;
pub mod docker;
pub mod history;
pub mod linearizable;
pub mod nemesis;
pub mod safety;
pub mod server_logs;
pub mod workload;
