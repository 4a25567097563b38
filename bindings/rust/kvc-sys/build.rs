//! Links libkvc statically. Where it comes from, in this order:
//!  1. `KVC_PREFIX=<dir>`: an installed prefix (`cmake --install build --prefix <dir>`);
//!  2. `pkg-config kvc` finds one (PKG_CONFIG_PATH);
//!  3. otherwise this repository's CMake builds and installs it into OUT_DIR (CMake, Ninja and
//!     the Debian packages of scripts/install-deps.sh are needed, as for the C build).
//! Every case reads the prefix's kvc.pc with `pkg-config --static`, so the link line is the one
//! the C package documents.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(command: &mut Command) {
    let status = command.status().unwrap_or_else(|e| panic!("kvc-sys: cannot run {command:?}: {e}"));
    assert!(status.success(), "kvc-sys: {command:?} failed with {status}");
}

/// Builds and installs libkvc from the repository this crate sits in; returns the prefix.
fn build_with_cmake() -> PathBuf {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..").canonicalize().unwrap();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let (build, prefix) = (out.join("build"), out.join("prefix"));
    run(Command::new("cmake").arg("-S").arg(&repository).arg("-B").arg(&build).args([
        "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DKVC_BUILD_TESTS=OFF", "-DKVC_BUILD_SAMPLES=OFF",
    ]));
    run(Command::new("cmake").arg("--build").arg(&build));
    run(Command::new("cmake").arg("--install").arg(&build).arg("--prefix").arg(&prefix));
    for watched in ["src", "include", "shaders", "cmake", "CMakeLists.txt"] {
        println!("cargo:rerun-if-changed={}", repository.join(watched).display());
    }
    prefix
}

fn pkg_config(pkg_config_path: Option<&Path>) -> Option<String> {
    let mut command = Command::new("pkg-config");
    command.args(["--static", "--libs", "kvc"]);
    if let Some(path) = pkg_config_path {
        command.env("PKG_CONFIG_PATH", path);
    }
    let output = command.output().ok()?;
    output.status.success().then(|| String::from_utf8(output.stdout).unwrap())
}

fn main() {
    println!("cargo:rerun-if-env-changed=KVC_PREFIX");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let libs = match env::var_os("KVC_PREFIX") {
        Some(prefix) => pkg_config(Some(&Path::new(&prefix).join("lib/pkgconfig")))
            .unwrap_or_else(|| panic!("kvc-sys: no lib/pkgconfig/kvc.pc under KVC_PREFIX={prefix:?}")),
        None => pkg_config(None).unwrap_or_else(|| {
            let prefix = build_with_cmake();
            pkg_config(Some(&prefix.join("lib/pkgconfig"))).expect("kvc-sys: the CMake install has no kvc.pc")
        }),
    };
    // -L<dir>, -l<name> and the full paths of static archives (glslang, SPIRV-Tools), in order.
    for flag in libs.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(name) = flag.strip_prefix("-l") {
            let kind = if name == "kvc" { "static:-bundle" } else { "dylib" };
            println!("cargo:rustc-link-lib={kind}={name}");
        } else if let Some(archive) = flag.strip_suffix(".a").map(Path::new) {
            let name = archive.file_name().unwrap().to_str().unwrap().trim_start_matches("lib");
            println!("cargo:rustc-link-search=native={}", archive.parent().unwrap().display());
            println!("cargo:rustc-link-lib=static:-bundle={name}");
        }
    }
}
