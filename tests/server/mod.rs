//! A `redis-server` for a test: started on a free loopback port in a temporary directory, with
//! nothing saved, and stopped by its process id when the test drops it.

#![allow(dead_code)] // each test binary uses part of it

use std::io::ErrorKind;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use tollgate::redis::RedisKeyedRateLimiter;
use tollgate::Quota;

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
        let port = free_port();
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

    /// The GCRA state stored under `key`, 0 when there is none.
    pub fn stored(&self, key: &[u8]) -> u64 {
        let key = std::str::from_utf8(key).expect("a UTF-8 key");
        match self.command(&["GET", key]) {
            redis::Value::Nil => 0,
            redis::Value::BulkString(bytes) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{key} holds {bytes:?}")),
            other => panic!("{key} holds {other:?}"),
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
