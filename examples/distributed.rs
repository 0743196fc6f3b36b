//! One limit shared by several server processes through Redis: each process hammers the same
//! key as fast as it can, and each second the output shows what each process admitted and what
//! they admitted together, against the quota.
//!
//!     cargo run --release --features redis --example distributed
//!     REDIS_URL=redis://127.0.0.1:6379/ cargo run --release --features redis --example distributed
//!
//! Without `REDIS_URL` the example starts its own `redis-server` on a free loopback port (from
//! `apt-get install redis-server`) and stops it at the end. It starts three worker processes
//! (this program again, with `worker` as its first argument), each with its own connection.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tollgate::redis::RedisRateLimiter;
use tollgate::Quota;

const WORKERS: usize = 3;
const SECONDS: u64 = 5;
/// The shared quota: 2 000 a second, in bursts of 200.
const RATE: u64 = 2_000;
const BURST: u64 = 200;

fn quota() -> Quota {
    Quota::per_second(RATE)
        .and_then(|q| q.with_burst(BURST))
        .expect("a valid quota")
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A worker: checks the shared key from 32 tasks until `SECONDS` after `start` (Unix
/// milliseconds), printing `<second> <admitted>` at the end of each second.
fn worker(url: &str, key: &str, start: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let client = redis::Client::open(url).expect("a Redis URL");
        let conn = redis::aio::ConnectionManager::new(client)
            .await
            .expect("a connection to Redis");
        let limiter = RedisRateLimiter::gcra(conn, key, quota()).expect("a limiter");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
        for _ in 0..32 {
            let (limiter, tx) = (limiter.clone(), tx.clone());
            tokio::spawn(async move {
                let wait = start.saturating_sub(unix_millis());
                tokio::time::sleep(Duration::from_millis(wait)).await;
                while unix_millis() < start + SECONDS * 1_000 {
                    if limiter.check().await.is_ok() {
                        let _ = tx.send(unix_millis());
                    }
                }
            });
        }
        drop(tx);
        let mut per_second = vec![0u64; SECONDS as usize];
        while let Some(at) = rx.recv().await {
            if let Some(second) = at.checked_sub(start).map(|ms| (ms / 1_000) as usize) {
                if second < per_second.len() {
                    per_second[second] += 1;
                }
            }
        }
        for (second, admitted) in per_second.iter().enumerate() {
            println!("{second} {admitted}");
        }
    });
}

/// A `redis-server` of the example's own, on a free port, stopped when dropped.
struct OwnServer(Child, String, std::path::PathBuf);

impl OwnServer {
    fn start() -> OwnServer {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(format!("tollgate-example-{port}"));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (apt-get install redis-server), or set REDIS_URL");
        let url = format!("redis://127.0.0.1:{port}/");
        let client = redis::Client::open(url.as_str()).expect("a URL");
        let deadline = Instant::now() + Duration::from_secs(10);
        while client.get_connection().is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        OwnServer(child, url, dir)
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.2);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        let start = args[4].parse().expect("a start time");
        worker(&args[2], &args[3], start);
        return;
    }
    let own = std::env::var("REDIS_URL").is_err().then(OwnServer::start);
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| own.as_ref().unwrap().1.clone());
    // A key of this run's own, so that runs against one Redis do not share a limit.
    let key = format!("tollgate-example:{}", unix_millis());
    let start = unix_millis() + 500;
    println!(
        "{WORKERS} processes share one limit of {RATE} per second (bursts of {BURST}) through \
         Redis at {url}\n"
    );
    let (tx, rx) = mpsc::channel::<(usize, usize, u64)>();
    let mut children = Vec::new();
    for id in 0..WORKERS {
        let mut child = Command::new(std::env::current_exe().expect("this program"))
            .args(["worker", &url, &key, &start.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("a worker process");
        let stdout = child.stdout.take().expect("its output");
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let mut fields = line.split(' ').map(|f| f.parse::<u64>().unwrap_or(0));
                let (second, admitted) = (fields.next().unwrap_or(0), fields.next().unwrap_or(0));
                let _ = tx.send((id, second as usize, admitted));
            }
        });
        children.push(child);
    }
    drop(tx);
    let mut seconds: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for (id, second, admitted) in rx {
        seconds.entry(second).or_insert_with(|| vec![0; WORKERS])[id] = admitted;
    }
    for child in &mut children {
        let _ = child.wait();
    }
    println!(
        "{:8} {:>30} {:>10} {:>14}",
        "second", "admitted by each process", "together", "quota's rate"
    );
    let mut total = 0;
    for (second, counts) in &seconds {
        let together: u64 = counts.iter().sum();
        total += together;
        let each: Vec<String> = counts.iter().map(u64::to_string).collect();
        // Any one second may also hold up to a burst's worth above the rate (the first spends
        // the initial burst); the total below is the bound that holds.
        println!(
            "{second:8} {:>30} {together:>10} {RATE:>14}",
            each.join(" + ")
        );
    }
    let most = BURST + RATE * SECONDS;
    println!("\nin all: {total} admitted, where the quota allows at most {most} in {SECONDS} s");
    assert!(
        total <= most,
        "the processes together admitted more than the quota"
    );
}
