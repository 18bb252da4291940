//! Test helper: extracts the embedded preload once and prints its path (exit 1 on error).

fn main() {
    match sandbox_host::extract::extracted() {
        Ok(path) => println!("{}", path.display()),
        Err(e) => {
            eprintln!("extract_once: {e}");
            std::process::exit(1);
        }
    }
}
