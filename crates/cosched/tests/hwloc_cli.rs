//! cosched and hwloc read each other's machines: lstopo's XML exports and synthetic strings go into
//! `cosched topo --machine`, and what `cosched topo --of synthetic|xml` writes goes back into
//! `lstopo --input`, with the same numbers of PUs, cores and caches. Skipped, saying so, where lstopo
//! is not installed (`.ci/run` installs Debian's hwloc).

use std::process::Command;

/// Synthetic machines as hwloc's documentation and `lstopo --of synthetic` write them.
const HWLOC_SYNTHETIC: &[&str] = &[
    "pack:2 node:1 l2:1 core:2 pu:1",
    "Package:2 [NUMANode(memory=1GB)] L3Cache:1(size=16MB) L2Cache:4(size=1MB) L1dCache:1(size=32kB) \
     L1iCache:1(size=32kB) Core:1 PU:2",
    "pack:4 die:2 [numa] l3:1(size=32MB) core:8 pu:2",
    "socket:2 group:2 [numa] core:4 pu:1",
];

/// lstopo, or `None` after saying that the test is skipped.
fn lstopo() -> Option<&'static str> {
    let tool = ["lstopo-no-graphics", "lstopo"].into_iter().find(|tool| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if tool.is_none() {
        eprintln!("skipped: lstopo is not installed (apt-get install hwloc-nox)");
    }
    tool
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn cosched(args: &[&str]) -> String {
    run(env!("CARGO_BIN_EXE_cosched"), args)
}

/// How many objects of `kind` (pu, core, l1, l2, l3) lstopo finds in `input`.
fn lstopo_count(tool: &str, input: &str, kind: &str) -> usize {
    run(tool, &["--input", input, "--only", kind, "--of", "console"])
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

/// How many nodes of `level` cosched's tree of `machine` has.
fn cosched_count(machine: &str, level: &str) -> usize {
    let json: serde_json::Value =
        serde_json::from_str(&cosched(&["topo", "--machine", machine, "--json"])).unwrap();
    json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["level"] == level)
        .count()
}

#[test]
fn lstopo_exports_are_read() {
    let Some(tool) = lstopo() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let this = dir.path().join("this.xml");
    run(tool, &["--of", "xml", this.to_str().unwrap()]);
    let mut inputs = vec![this];
    for (i, text) in HWLOC_SYNTHETIC.iter().enumerate() {
        let file = dir.path().join(format!("synthetic{i}.xml"));
        run(
            tool,
            &["--input", text, "--of", "xml", file.to_str().unwrap()],
        );
        inputs.push(file);
    }
    for file in &inputs {
        let file = file.to_str().unwrap();
        for (kind, level) in [("pu", "pu"), ("core", "core")] {
            assert_eq!(
                cosched_count(file, level),
                lstopo_count(tool, file, kind),
                "{kind}s of {file}"
            );
        }
    }
    for text in HWLOC_SYNTHETIC {
        for (kind, level) in [("pu", "pu"), ("core", "core"), ("l2", "l2")] {
            assert_eq!(
                cosched_count(text, level),
                lstopo_count(tool, text, kind),
                "{kind}s of {text}"
            );
        }
    }
}

#[test]
fn what_topo_writes_lstopo_reads_back() {
    let Some(tool) = lstopo() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let machines = [
        "this",
        "taco-opteron8435",
        "casas-opteron6172",
        "scalpel-xeon-e5620",
        HWLOC_SYNTHETIC[1],
        "package:2 l3:1(size=6MB) l2:3(size=1536kB) core:2 pu:2",
    ];
    for machine in machines {
        let synthetic = cosched(&["topo", "--machine", machine, "--of", "synthetic"]);
        let xml = dir.path().join("m.xml");
        std::fs::write(
            &xml,
            cosched(&["topo", "--machine", machine, "--of", "xml"]),
        )
        .unwrap();
        for input in [synthetic.trim(), xml.to_str().unwrap()] {
            for (kind, level) in [
                ("pu", "pu"),
                ("core", "core"),
                ("l1", "l1"),
                ("l2", "l2"),
                ("l3", "l3"),
            ] {
                assert_eq!(
                    lstopo_count(tool, input, kind),
                    cosched_count(machine, level),
                    "{kind}s of {machine} read back from {input}"
                );
            }
        }
    }
}

#[test]
fn sim_takes_an_xml_machine() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("taco.xml");
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &xml,
        cosched(&["topo", "--machine", "taco-opteron8435", "--of", "xml"]),
    )
    .unwrap();
    let workload_arg = workload.to_str().unwrap();
    cosched(&[
        "gen",
        "--jobs",
        "4",
        "--rate",
        "9",
        "--seed",
        "2",
        "-o",
        workload_arg,
    ]);
    let out = cosched(&[
        "sim",
        workload_arg,
        "--machine",
        xml.to_str().unwrap(),
        "--policy",
        "eq",
    ]);
    assert!(out.contains("(24 CPUs)"), "{out}");
}
