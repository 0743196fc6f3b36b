//! A `redis-server` for a test: started on a free loopback port in a temporary directory, with
//! nothing saved, and stopped by its process id when the test drops it.

#![allow(dead_code)] // each test binary uses part of it

use std::io::ErrorKind;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis::aio::ConnectionManager;
use tollgate::redis::{RedisAlgorithm, RedisKeyedRateLimiter};
use tollgate::{Decision, Quota};

/// What installs the server where it is missing, for the message of a test that cannot start it.
const INSTALL: &str = "apt-get update && apt-get install -y redis-server redis-tools";

pub struct Server {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

impl Server {
    /// A server with nothing saved.
    pub fn start() -> Server {
        Server::with_args(&["--save", "", "--appendonly", "no"])
    }

    /// A server with these arguments besides its port, address and directory.
    pub fn with_args(args: &[&str]) -> Server {
        Server::on_port(free_port(), args)
    }

    /// A server on `port`, with these arguments besides its port, address and directory.
    pub fn on_port(port: u16, args: &[&str]) -> Server {
        let dir =
            std::env::temp_dir().join(format!("tollgate-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut server = Server {
            child: None,
            port,
            dir,
            args: args.iter().map(|a| a.to_string()).collect(),
        };
        server.restart();
        server
    }

    /// Starts the server (again, after `stop`) on its port, and waits until it answers.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| match err.kind() {
                ErrorKind::NotFound => panic!("redis-server is not installed: {INSTALL}"),
                _ => panic!("redis-server could not start: {err}"),
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.try_command(&["PING"]).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server by its process id, and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = child.wait();
        }
    }

    /// Kills the server (`SIGKILL`): a crash, with no chance to write anything more.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn cluster_info(&self) -> String {
        self.try_command(&["CLUSTER", "INFO"])
            .map_or(String::new(), |v| text(&v))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A new connection that reconnects on its own.
    pub async fn connection(&self) -> ConnectionManager {
        let client = redis::Client::open(self.url()).expect("a client");
        ConnectionManager::new(client).await.expect("a connection")
    }

    /// A GCRA limiter per key for `quota` on a new connection, its keys under `rl:`.
    pub async fn limiter(&self, quota: Quota) -> RedisKeyedRateLimiter {
        RedisKeyedRateLimiter::gcra(self.connection().await, "rl:", quota).expect("a limiter")
    }

    /// A limiter per key that applies `algorithm`, on a new connection, its keys under `prefix`.
    pub async fn limiter_of(
        &self,
        prefix: &str,
        algorithm: impl Into<RedisAlgorithm>,
    ) -> RedisKeyedRateLimiter {
        RedisKeyedRateLimiter::builder(self.connection().await, prefix, algorithm)
            .build()
            .expect("a limiter")
    }

    /// A command, on a connection of its own.
    pub fn try_command(&self, args: &[&str]) -> redis::RedisResult<redis::Value> {
        let client = redis::Client::open(self.url())?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(1))?;
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut conn)
    }

    pub fn command(&self, args: &[&str]) -> redis::Value {
        self.try_command(args).expect("the command")
    }

    /// How many times the server has run the command `name` (lower case), from `INFO`.
    pub fn command_count(&self, name: &str) -> u64 {
        self.command_stat(name, "calls")
            .map_or(0, |calls| calls as u64)
    }

    /// The microseconds the server spent on each run of the command `name` (lower case), on
    /// average since its statistics were last reset, from `INFO`.
    pub fn command_micros(&self, name: &str) -> f64 {
        self.command_stat(name, "usec_per_call").unwrap_or(0.0)
    }

    /// A field of the server's statistics of the command `name`.
    fn command_stat(&self, name: &str, field: &str) -> Option<f64> {
        let info = match self.command(&["INFO", "commandstats"]) {
            redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            redis::Value::VerbatimString { text, .. } => text,
            other => panic!("INFO: {other:?}"),
        };
        let prefix = format!("cmdstat_{name}:");
        let stats = info.lines().find_map(|line| line.strip_prefix(&prefix))?;
        stats
            .split(',')
            .find_map(|pair| pair.strip_prefix(field)?.strip_prefix('='))?
            .parse()
            .ok()
    }

    /// The value stored under `key`, if any.
    pub fn stored(&self, key: &[u8]) -> Option<String> {
        let key = std::str::from_utf8(key).expect("a UTF-8 key");
        match self.command(&["GET", key]) {
            redis::Value::Nil => None,
            redis::Value::BulkString(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
            other => panic!("{key} holds {other:?}"),
        }
    }

    /// When the key expires, in milliseconds since the Unix epoch (-2 when it does not exist, -1
    /// without expiry).
    pub fn pexpiretime(&self, key: &[u8]) -> i64 {
        let key = std::str::from_utf8(key).expect("a UTF-8 key");
        match self.command(&["PEXPIRETIME", key]) {
            redis::Value::Int(at) => at,
            other => panic!("PEXPIRETIME {key}: {other:?}"),
        }
    }

    /// The server's clock, in microseconds since the Unix epoch.
    pub fn time_us(&self) -> i64 {
        match self.command(&["TIME"]) {
            redis::Value::Array(parts) => match parts.as_slice() {
                [redis::Value::BulkString(s), redis::Value::BulkString(us)] => {
                    let parse = |b: &[u8]| -> i64 {
                        std::str::from_utf8(b)
                            .unwrap()
                            .parse()
                            .expect("TIME's digits")
                    };
                    parse(s) * 1_000_000 + parse(us)
                }
                other => panic!("TIME: {other:?}"),
            },
            other => panic!("TIME: {other:?}"),
        }
    }

    /// The key's time to live in milliseconds (-2 when it does not exist, -1 without expiry).
    pub fn pttl(&self, key: &[u8]) -> i64 {
        let key = std::str::from_utf8(key).expect("a UTF-8 key");
        match self.command(&["PTTL", key]) {
            redis::Value::Int(ttl) => ttl,
            other => panic!("PTTL {key}: {other:?}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port that was free a moment ago: one the system gives a listener on port 0.
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// A port that was free a moment ago, and whose cluster bus port (10 000 above it) was too.
fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port < 55_000 && TcpListener::bind((Ipv4Addr::LOCALHOST, port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// A Redis Cluster of three masters on loopback, each a [`Server`], made one cluster by
/// `redis-cli --cluster create`.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| {
                let port = free_cluster_port();
                Server::on_port(
                    port,
                    &[
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "5000",
                    ],
                )
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|err| match err.kind() {
                ErrorKind::NotFound => panic!("redis-cli is not installed: {INSTALL}"),
                _ => panic!("redis-cli could not start: {err}"),
            });
        assert!(created.success(), "redis-cli --cluster create failed");
        let cluster = Cluster { nodes };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cluster
            .nodes
            .iter()
            .all(|n| n.cluster_info().contains("cluster_state:ok"))
        {
            assert!(Instant::now() < deadline, "the cluster did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        cluster
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Server::url).collect()
    }

    pub async fn connection(&self) -> redis::cluster_async::ClusterConnection {
        let client = redis::cluster::ClusterClient::new(self.urls()).expect("a cluster client");
        client
            .get_async_connection()
            .await
            .expect("a cluster connection")
    }

    /// The node that serves `slot`, and its node id, from `CLUSTER NODES`.
    fn owner(&self, slot: u16) -> (usize, String) {
        let nodes = text(&self.nodes[0].command(&["CLUSTER", "NODES"]));
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let serves = fields[8..].iter().any(|range| match range.split_once('-') {
                Some((a, b)) => {
                    (a.parse().unwrap_or(u16::MAX)..=b.parse().unwrap_or(0)).contains(&slot)
                }
                None => range.parse() == Ok(slot),
            });
            if serves {
                let port: u16 = fields[1].split([':', '@']).nth(1).unwrap().parse().unwrap();
                let index = self.nodes.iter().position(|n| n.port == port).unwrap();
                return (index, fields[0].to_string());
            }
        }
        panic!("no node serves slot {slot}")
    }

    fn id(&self, node: usize) -> String {
        text(&self.nodes[node].command(&["CLUSTER", "MYID"]))
    }

    /// Moves `slot`, with its keys, from the node that serves it to the next node: the steps of
    /// a slot migration, after which a client's map of slots is out of date until a `MOVED`
    /// reply corrects it. Returns the two nodes.
    pub fn migrate(&self, slot: u16) -> (usize, usize) {
        let (from, from_id) = self.owner(slot);
        let to = (from + 1) % self.nodes.len();
        let to_id = self.id(to);
        let s = slot.to_string();
        self.nodes[to].command(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id]);
        self.nodes[from].command(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id]);
        let keys = match self.nodes[from].command(&["CLUSTER", "GETKEYSINSLOT", &s, "1000"]) {
            redis::Value::Array(keys) => keys.iter().map(text).collect::<Vec<_>>(),
            other => panic!("GETKEYSINSLOT: {other:?}"),
        };
        if !keys.is_empty() {
            let port = self.nodes[to].port.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            self.nodes[from].command(&args);
        }
        for node in &self.nodes {
            node.command(&["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
        }
        (from, to)
    }
}

/// A reply's text.
fn text(value: &redis::Value) -> String {
    match value {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        redis::Value::SimpleString(text) => text.clone(),
        redis::Value::VerbatimString { text, .. } => text.clone(),
        other => panic!("not text: {other:?}"),
    }
}

/// A runtime for a test's own `block_on`s.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A fresh key for each use of a shared server.
pub fn fresh_key() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("k{}", NEXT.fetch_add(1, Relaxed))
}

/// The crate's transition in the script's units: the decision, and the fields of the state
/// (GCRA's TAT; a window's index and counts), from and to `state`.
pub fn decide(
    algorithm: &RedisAlgorithm,
    state: &[u64],
    now: u64,
    cost: u64,
) -> (Decision, Vec<u64>) {
    match algorithm {
        RedisAlgorithm::Gcra(gcra) => {
            let (decision, tat) = gcra.decide(state[0], now, cost);
            (decision, vec![tat])
        }
        RedisAlgorithm::SlidingWindow(window) => {
            let (decision, fields) = window.decide([state[0], state[1], state[2]], now, cost);
            (decision, fields.to_vec())
        }
        RedisAlgorithm::FixedWindow(window) => {
            let (decision, fields) = window.decide([state[0], state[1]], now, cost);
            (decision, fields.to_vec())
        }
        other => unreachable!("{other:?}"),
    }
}

/// The state a script leaves in a key written under `from` and read at `now` under `to` (the
/// same kind of algorithm): the crate's `carry_over` in the script's units.
pub fn carry(from: &RedisAlgorithm, to: &RedisAlgorithm, state: &[u64], now: u64) -> Vec<u64> {
    match (from, to) {
        (RedisAlgorithm::Gcra(from), RedisAlgorithm::Gcra(to)) => {
            vec![from.carry_over(state[0], now, to)]
        }
        (RedisAlgorithm::SlidingWindow(from), RedisAlgorithm::SlidingWindow(to)) => from
            .carry_over([state[0], state[1], state[2]], now, to)
            .to_vec(),
        (RedisAlgorithm::FixedWindow(from), RedisAlgorithm::FixedWindow(to)) => {
            from.carry_over([state[0], state[1]], now, to).to_vec()
        }
        other => unreachable!("{other:?}"),
    }
}

/// The fresh state of `algorithm`'s keys: all fields 0.
pub fn fresh(algorithm: &RedisAlgorithm) -> Vec<u64> {
    match algorithm {
        RedisAlgorithm::Gcra(_) => vec![0],
        RedisAlgorithm::SlidingWindow(_) => vec![0; 3],
        _ => vec![0; 2],
    }
}

/// The value a script stores for `state` of `algorithm`: its fields joined by `:`, then `@` and
/// the parameters it was written under; nothing for a fresh one (every admission of a cost above
/// 0 leaves a state that is not all 0).
pub fn stored(algorithm: &RedisAlgorithm, state: &[u64]) -> Option<String> {
    let fields: Vec<String> = state.iter().map(u64::to_string).collect();
    let value = format!("{}@{}", fields.join(":"), params(algorithm));
    state.iter().any(|&f| f > 0).then_some(value)
}

/// The parameters a script writes beside a state of `algorithm`: its number and its three
/// parameters, in the script's units.
pub fn params(algorithm: &RedisAlgorithm) -> String {
    match algorithm {
        RedisAlgorithm::Gcra(gcra) => format!(
            "1:{}:{}:{}",
            gcra.emission_interval().as_micros(),
            gcra.tolerance().as_micros(),
            gcra.burst()
        ),
        RedisAlgorithm::SlidingWindow(w) => format!("2:{}:{}:0", w.window().as_millis(), w.limit()),
        RedisAlgorithm::FixedWindow(w) => format!("3:{}:{}:0", w.window().as_millis(), w.limit()),
        other => unreachable!("{other:?}"),
    }
}
