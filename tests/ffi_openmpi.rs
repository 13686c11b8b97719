//! OpenMPI 4.1 (`pml cm` + `mtl ofi`) runs a small MPI program over spray on
//! loopback: blocking send/recv at several sizes with data checks, MPI_Iprobe
//! with MPI_ANY_SOURCE (FI_PEEK), MPI_Cancel, allreduce and barrier.
//! Skipped (with a message) where OpenMPI is not installed.

mod common;
use common::*;

use std::process::Command;

#[test]
fn openmpi_mtl_ofi() {
    let have = Command::new("mpicc").arg("--version").output().is_ok()
        && Command::new("mpirun.openmpi")
            .arg("--version")
            .output()
            .is_ok();
    if !have {
        eprintln!("SKIP: OpenMPI not installed (apt-get install openmpi-bin libopenmpi-dev)");
        return;
    }
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/mpi_pingpong.c");
    let dir = provider_dir().join("../mpi-test");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let exe = dir.join(format!("mpi_pingpong-{}", std::process::id()));
    let cc = Command::new("mpicc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(src)
        .output()
        .expect("mpicc");
    assert!(
        cc.status.success(),
        "mpicc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let prov = provider_dir();
    let out = Command::new("timeout")
        .args([
            "120",
            "mpirun.openmpi",
            "-np",
            "2",
            "--mca",
            "pml",
            "cm",
            "--mca",
            "mtl",
            "ofi",
        ])
        .args([
            "--mca",
            "mtl_ofi_provider_include",
            "spray",
            "--mca",
            "btl",
            "self",
        ])
        .args([
            "--mca",
            "oob_tcp_if_include",
            "lo",
            "-x",
            "FI_PROVIDER=spray",
        ])
        .arg("-x")
        .arg(format!("FI_PROVIDER_PATH={}", prov.display()))
        .args(["-x", "FI_SPRAY_IFACE=lo"])
        .arg(&exe)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun");
    let _ = std::fs::remove_file(&exe);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("OK allreduce=3"),
        "mpirun failed:\n{text}"
    );
}
