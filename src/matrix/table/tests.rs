use super::*;

fn run(verdict: Verdict, sig: Option<Signature>, phase: &str, ready: Option<f64>) -> RunResult {
    RunResult {
        run_id: "r".into(),
        verdict,
        signature: sig,
        phase: Some(phase.into()),
        ready_s: ready,
        elapsed_s: ready.unwrap_or(5.0),
        line: None,
        metrics: BTreeMap::new(),
        bench_problem: None,
        teardown: "clean".into(),
        clean: true,
        resumed: false,
        job: None,
    }
}

fn row(index: usize, values: [&str; 2], runs: Vec<RunResult>) -> CellRow {
    CellRow {
        index,
        label: format!("FLASHMLA={} torch.compile={}", values[0], values[1]),
        values: values.iter().map(|s| s.to_string()).collect(),
        state: CellState::Done,
        runs,
    }
}

fn two_by_two() -> (Vec<String>, Vec<CellRow>) {
    let axes = vec!["FLASHMLA".to_string(), "torch.compile".to_string()];
    let mut ready = run(Verdict::Ready, None, "ready", Some(12.0));
    ready.metrics.insert("tok_s".into(), 1500.0);
    let rows = vec![
        row(0, ["0", "off"], vec![ready]),
        row(
            1,
            ["0", "on"],
            vec![run(
                Verdict::Failed,
                Some(Signature::GraphCapture),
                "capture_cuda_graph",
                None,
            )],
        ),
        row(
            2,
            ["1", "off"],
            vec![run(Verdict::Stalled, None, "load_weights", None)],
        ),
        row(
            3,
            ["1", "on"],
            vec![run(
                Verdict::Failed,
                Some(Signature::GraphCapture),
                "capture_cuda_graph",
                None,
            )],
        ),
    ];
    (axes, rows)
}

#[test]
fn groups_name_the_cause_and_what_the_cells_share() {
    let (axes, rows) = two_by_two();
    let sentences: Vec<String> = groups(&axes, &rows)
        .into_iter()
        .map(|g| g.sentence)
        .collect();
    assert_eq!(
        sentences,
        [
            "2 cells failed with graph_capture during capture_cuda_graph: all have torch.compile=on",
            "1 cell stalled during load_weights: FLASHMLA=1 torch.compile=off",
            "1 cell became ready: FLASHMLA=0 torch.compile=off",
        ]
    );
}

#[test]
fn repeats_show_medians_and_spread() {
    let axes = vec!["A".to_string()];
    let mut runs = Vec::new();
    for (r, m) in [(10.0, 100.0), (12.0, 130.0), (11.0, 90.0)] {
        let mut x = run(Verdict::Ready, None, "ready", Some(r));
        x.metrics.insert("rps".into(), m);
        runs.push(x);
    }
    runs.push(run(Verdict::Failed, Some(Signature::CudaOom), "load", None));
    let rows = vec![CellRow {
        index: 0,
        label: "A=1".into(),
        values: vec!["1".into()],
        state: CellState::Done,
        runs,
    }];
    let (header, body) = text_rows(&axes, &rows);
    assert_eq!(
        header,
        [
            "#",
            "A",
            "verdict",
            "signature",
            "phase",
            "ready",
            "rps",
            "notes"
        ]
    );
    assert_eq!(body[0][2], "failed 1/4, ready 3/4");
    assert_eq!(body[0][5], "11.0s (10.0s–12.0s)");
    assert_eq!(body[0][6], "100 (90.0–130)");
    assert_eq!(spread(&[4.0, 1.0, 3.0, 2.0]), Some((2.5, 1.0, 4.0)));
}

#[test]
fn every_format_carries_the_cells() {
    let (axes, rows) = two_by_two();
    let md = render(Format::Md, "m1", "done", &axes, &rows);
    assert!(md.contains("| 2 | 0"), "{md}");
    assert!(md.contains("- 2 cells failed with graph_capture"), "{md}");
    let csv = render(Format::Csv, "m1", "done", &axes, &rows);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "cell,FLASHMLA,torch.compile,verdict,signature,phase,runs,ready_s,ready_s_min,ready_s_max,tok_s,tok_s_min,tok_s_max,notes"
    );
    assert_eq!(
        lines.next().unwrap(),
        "1,0,off,ready,,ready,1,12,12,12,1500,1500,1500,"
    );
    let json: serde_json::Value =
        serde_json::from_str(&render(Format::Json, "m1", "done", &axes, &rows)).unwrap();
    assert_eq!(json["cells"][1]["runs"][0]["signature"], "graph_capture");
    assert_eq!(json["cells"][1]["state"], "done");
    // Cells are numbered from 1 in every format: table row "2" is JSON cell 2.
    assert_eq!(json["cells"][0]["cell"], 1);
    assert_eq!(json["cells"][1]["cell"], 2);
    assert_eq!(json["groups"][0]["cells"], serde_json::json!([2, 4]));
    let back: Vec<CellRow> = serde_json::from_value(json["cells"].clone()).unwrap();
    assert_eq!(back, rows, "the JSON reads back as the same rows");
    let bad =
        serde_json::json!([{"cell": 0, "label": "x", "values": [], "state": "done", "runs": []}]);
    assert!(serde_json::from_value::<Vec<CellRow>>(bad).is_err());
}

#[test]
fn skipped_cells_say_why() {
    let (axes, mut rows) = two_by_two();
    rows[3].state = CellState::Skipped {
        reason: "not run: mem stopped after cuda_oom".into(),
    };
    rows[3].runs.clear();
    let (_, body) = text_rows(&axes, &rows);
    assert_eq!(body[3][3], "skipped");
    assert_eq!(
        body[3].last().unwrap(),
        "not run: mem stopped after cuda_oom"
    );
    let g = groups(&axes, &rows);
    assert_eq!(
        g.last().unwrap().sentence,
        "1 cell was skipped: FLASHMLA=1 torch.compile=on"
    );
}

#[test]
fn the_h200_matrix_check_groups_as_recorded() {
    // tests/fixtures/gpu/matrix_check/matrix.json: a real run on an H200 (see its README).
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/gpu/matrix_check/matrix.json"
    ))
    .unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let axes: Vec<String> = serde_json::from_value(json["axes"].clone()).unwrap();
    let rows: Vec<CellRow> = serde_json::from_value(json["cells"].clone()).unwrap();
    let sentences: Vec<String> = groups(&axes, &rows)
        .into_iter()
        .map(|g| g.sentence)
        .collect();
    assert_eq!(
        sentences,
        [
            "1 cell failed with cuda_oom: gib=160 escape=off",
            "5 cells became ready"
        ]
    );
    let (_, body) = text_rows(&axes, &rows);
    let last = body.last().unwrap();
    assert!(
        last.last()
            .unwrap()
            .starts_with("DIRTY: 2566 MiB of GPU memory still held"),
        "{last:?}"
    );
}

#[test]
fn batch_jobs_get_a_job_column_with_their_ids() {
    let axes = vec!["A".to_string()];
    let job = |id: &str, verdict: Verdict, sig: Option<Signature>| RunResult {
        job: Some(id.into()),
        ..run(verdict, sig, "ready", Some(1.0))
    };
    let rows = vec![
        CellRow {
            index: 0,
            label: "A=1".into(),
            values: vec!["1".into()],
            state: CellState::Done,
            runs: vec![
                job("41", Verdict::Ready, None),
                job("43", Verdict::Ready, None),
            ],
        },
        CellRow {
            index: 1,
            label: "A=2".into(),
            values: vec!["2".into()],
            state: CellState::Done,
            runs: vec![job("42", Verdict::Failed, Some(Signature::ImportError))],
        },
    ];
    let (header, body) = text_rows(&axes, &rows);
    assert_eq!(header[..4], ["#", "A", "job", "verdict"]);
    assert_eq!(body[0][2], "41,43");
    assert_eq!(body[1][2..4], ["42", "failed"]);
    let csv = render(Format::Csv, "m1", "done", &axes, &rows);
    assert!(csv.starts_with("cell,A,job,verdict,"), "{csv}");
    assert!(csv.contains("\n2,2,42,failed,import_error,"), "{csv}");
    let json: serde_json::Value =
        serde_json::from_str(&render(Format::Json, "m1", "done", &axes, &rows)).unwrap();
    assert_eq!(json["cells"][1]["runs"][0]["job"], "42");
    // Without jobs, no column.
    let (axes, rows) = two_by_two();
    assert!(!text_rows(&axes, &rows).0.contains(&"job".to_string()));
}
