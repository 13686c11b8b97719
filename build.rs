//! Generates libfabric bindings with bindgen from the installed headers and links libfabric.
use std::env;
use std::path::PathBuf;
use std::process::Command;

/// Include directories from `pkg-config --cflags-only-I libfabric`, or a clear failure.
fn libfabric_includes() -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(["--cflags-only-I", "libfabric"])
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => fail(&format!(
            "`pkg-config libfabric` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => fail(&format!("cannot run pkg-config: {e}")),
    };
    let flags = String::from_utf8_lossy(&out.stdout).to_string();
    let dirs: Vec<String> = flags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-I"))
        .map(str::to_owned)
        .collect();
    let mut search: Vec<PathBuf> = dirs.iter().map(PathBuf::from).collect();
    search.push(PathBuf::from("/usr/include"));
    search.push(PathBuf::from("/usr/local/include"));
    if !search
        .iter()
        .any(|d| d.join("rdma/providers/fi_prov.h").exists())
    {
        fail("libfabric headers (rdma/providers/fi_prov.h) not found");
    }
    dirs
}

fn fail(msg: &str) -> ! {
    eprintln!(
        "error: {msg}\nspray-fi needs the libfabric development files: \
         install `libfabric-dev` (Debian/Ubuntu) or `libfabric-devel` and make sure \
         `pkg-config libfabric` works (set PKG_CONFIG_PATH for a private install)."
    );
    std::process::exit(1);
}

fn main() {
    println!("cargo:rerun-if-changed=include/spray_fi.h");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let includes = libfabric_includes();
    if let Ok(o) = Command::new("pkg-config")
        .args(["--libs-only-L", "libfabric"])
        .output()
    {
        for d in String::from_utf8_lossy(&o.stdout).split_whitespace() {
            if let Some(dir) = d.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={dir}");
            }
        }
    }
    // DT_NEEDED libfabric.so.1: needed when libfabric itself was dlopened RTLD_LOCAL.
    println!("cargo:rustc-link-lib=dylib=fabric");

    let mut b = bindgen::Builder::default()
        .header("include/spray_fi.h")
        .allowlist_function("fi_.*")
        .allowlist_type("fi_.*|fid.*|FI_.*")
        .allowlist_var("FI_.*|fi_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for d in &includes {
        b = b.clang_arg(format!("-I{d}"));
    }
    let bindings = match b.generate() {
        Ok(b) => b,
        Err(e) => fail(&format!("bindgen over include/spray_fi.h failed: {e}")),
    };
    let out = PathBuf::from(env::var("OUT_DIR").unwrap_or_else(|_| ".".into())).join("bindings.rs");
    if let Err(e) = bindings.write_to_file(&out) {
        fail(&format!("cannot write {}: {e}", out.display()));
    }
}
