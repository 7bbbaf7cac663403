//! Try the renderings without the `ksearch` binary:
//! `cargo run -p ksearch-report --example report -- RUN_DIR [report OUT.html | show NODE | export DIR]`.

use std::io::Write as _;
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, rest @ ..] = args.as_slice() else {
        return Err("usage: report RUN_DIR [report OUT.html | show NODE | export DIR]".into());
    };
    // `sample` / `sample-mlx`: the hand-built sample run instead of a run directory.
    let data = match dir.as_str() {
        "sample" => ksearch_report::sample::run_data(ksearch_core::task::BackendKind::C),
        "sample-mlx" => ksearch_report::sample::run_data(ksearch_core::task::BackendKind::Mlx),
        _ => ksearch_report::load(Path::new(dir))?,
    };
    let mut out = std::io::stdout().lock();
    match rest {
        [] => out.write_all(ksearch_report::html::render(&data).as_bytes())?,
        [cmd, arg] if cmd == "report" => std::fs::write(arg, ksearch_report::html::render(&data))?,
        [cmd, node] if cmd == "show" => {
            out.write_all(ksearch_report::show::render(&data, node.parse()?)?.as_bytes())?;
        }
        [cmd, to] if cmd == "export" => {
            let export = ksearch_report::export::export(&data)?;
            for p in ksearch_report::export::write(&export, Path::new(to))? {
                writeln!(out, "{}", p.display())?;
            }
        }
        _ => return Err("usage: report RUN_DIR [report OUT.html | show NODE | export DIR]".into()),
    }
    Ok(())
}
