//! Builds the C side of the `long double` code (see src/longdouble/libc_ld.c).

fn main() {
    println!("cargo:rerun-if-changed=src/longdouble/libc_ld.c");
    cc::Build::new()
        .file("src/longdouble/libc_ld.c")
        .warnings(true)
        .compile("ruvio_ld");
}
