fn main() {
    std::process::exit(zkfle::cli::run());
}
