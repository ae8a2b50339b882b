//! `ruvio`: start one pinned glommio executor per shard, each owning its slice of
//! the keyspace and its sockets, and wait for them.

use ruvio_server::cluster::topology;
use ruvio_server::cmd::registry;
use ruvio_server::memory::alloc;
use ruvio_server::mesh::forward;
use ruvio_server::persistence::reshard;
use ruvio_server::{config, shard, EXIT_SHARD_FAILED};

use config::Config;
use glommio::{LocalExecutorBuilder, Placement};
use std::sync::Arc;

/// Bytes of I/O buffers glommio registers per executor. Ruvio's sockets use its own
/// ring, so glommio needs little (its default is 10 MiB per shard).
const GLOMMIO_IO_MEMORY_BYTES: usize = 256 << 10;

/// Exits the process when dropped by a panic unwinding a shard's thread.
struct ExitIfShardDies(usize);

impl Drop for ExitIfShardDies {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "ruvio: shard {} stopped after a panic (logged above); exiting so the service manager restarts the server",
                self.0
            );
            std::process::exit(EXIT_SHARD_FAILED);
        }
    }
}

/// Every allocation is counted (INFO used_memory, maxmemory).
#[global_allocator]
static ALLOCATOR: alloc::CountingAlloc = alloc::CountingAlloc;

fn main() {
    let cfg = match Config::load(config::parse_args(std::env::args())) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("ruvio: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = cfg.start_log() {
        fail(&e);
    }
    if let Err(e) = reshard::prepare(&cfg, registry::logged_handler) {
        fail(&e);
    }
    let registry = registry::registry();
    let topo = Arc::new(topology::Topology::new(&cfg));
    let shared = Arc::new(shard::Shared::new(
        cfg.shards,
        cfg.databases,
        ruvio_server::clock::unix_ms(),
    ));
    if let Err(e) = ruvio_server::acl::start(&shared.acl, &cfg) {
        fail(&e);
    }
    let signalled = shared.clone();
    let on_signal = move || signalled.exit.signal();
    if let Err(e) = ruvio_server::persistence::shutdown::watch_signals(on_signal) {
        fail(&format!("cannot watch for SIGTERM: {e}"));
    }
    let mut plan = if cfg.shards > 1 {
        Some(
            forward::MeshPlan::new(cfg.shards)
                .unwrap_or_else(|e| fail(&format!("cannot create shard channels: {e}"))),
        )
    } else {
        None
    };
    eprintln!(
        "ruvio {}: {} shard(s), {} mode, {} commands, listening on {}:{}{}",
        env!("CARGO_PKG_VERSION"),
        cfg.shards,
        cfg.port_mode.name(),
        registry.commands.len(),
        cfg.bind,
        cfg.port,
        if cfg.port_mode == config::PortMode::PerShard {
            format!("-{}", cfg.shard_port(cfg.shards - 1))
        } else {
            String::new()
        },
    );
    let mut handles = Vec::new();
    for id in 0..cfg.shards {
        let (cfg, topo, shared) = (cfg.clone(), topo.clone(), shared.clone());
        let mesh = plan.as_mut().map(|m| m.take(id));
        let cpu = cfg.cpus[id];
        let handle = LocalExecutorBuilder::new(Placement::Fixed(cpu))
            .name(&format!("ruvio-shard-{id}"))
            .io_memory(GLOMMIO_IO_MEMORY_BYTES)
            .spawn(move || async move {
                let _exit_if_this_shard_dies = ExitIfShardDies(id);
                if let Some(mesh) = mesh {
                    ruvio_server::mesh::forward::install_mesh(mesh);
                }
                match shard::Shard::new(id, cfg, topo, shared) {
                    Ok(shard) => shard.run().await,
                    Err(e) => fail(&format!("shard {id}: {e}")),
                }
            })
            .unwrap_or_else(|e| fail(&format!("cannot start shard {id} on CPU {cpu}: {e}")));
        handles.push(handle);
    }
    for handle in handles {
        let _ = handle.join();
    }
}

fn fail(message: &str) -> ! {
    eprintln!("ruvio: {message}");
    std::process::exit(1);
}
