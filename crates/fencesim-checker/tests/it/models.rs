//! The linearizability check's models on small Jepsen histories written inline: the
//! compare-and-set register under both readings of a failed cas, Knossos's unknown reads, an
//! initial value, and the mutex models over acquire and release.

use fencesim_checker::{check_with, CheckOptions, CheckResult, FailedCas, LockModel, Verdict};
use fencesim_history::{read_jepsen_edn, read_jsonl, ViolationKind};

/// Judge an EDN history (one op map per line, Knossos's style) with `options`.
fn judge(edn: &str, options: &CheckOptions) -> CheckResult {
    let history = read_jepsen_edn(edn, "inline").expect("the test history reads");
    check_with(&history, options)
}

/// The verdict and, for each violation, its kind, witnesses and explanation.
fn outcome(result: &CheckResult) -> (Verdict, Vec<(ViolationKind, Vec<u64>, String)>) {
    let violations = result
        .violations
        .iter()
        .map(|v| (v.kind, v.witnesses.clone(), v.explanation.clone()))
        .collect();
    (result.verdict, violations)
}

fn with(failed_cas: FailedCas, initial: Option<&str>) -> CheckOptions {
    CheckOptions {
        failed_cas,
        initial_value: initial.map(str::to_owned),
        ..CheckOptions::default()
    }
}

fn lock_model(model: LockModel) -> CheckOptions {
    CheckOptions {
        lock_model: Some(model),
        ..CheckOptions::default()
    }
}

/// A failed cas expecting 1 while the register certainly holds 1 (written before it was
/// invoked, and nothing else writes): under Knossos's reading it never happened, so the
/// history is valid; under Porcupine's it claims to have found another value than 1, which no
/// order explains.
#[test]
fn a_failed_cas_is_valid_under_knossos_and_not_under_porcupine() {
    let edn = "{:process 0, :type :invoke, :f :write, :value 1}
               {:process 0, :type :ok, :f :write, :value 1}
               {:process 1, :type :invoke, :f :cas, :value [1 2]}
               {:process 1, :type :fail, :f :cas, :value [1 2]}
               {:process 2, :type :invoke, :f :read, :value nil}
               {:process 2, :type :ok, :f :read, :value 1}";
    let knossos = judge(edn, &with(FailedCas::Knossos, None));
    assert_eq!(outcome(&knossos), (Verdict::Valid, vec![]));
    let porcupine = judge(edn, &with(FailedCas::Porcupine, None));
    assert_eq!(
        outcome(&porcupine),
        (
            Verdict::Invalid,
            vec![(
                ViolationKind::NotLinearizable,
                vec![2, 3],
                "key \"register\": no order of its 3 operations that respects real time \
                 explains the operation invoked at index 2; every order placing the operations \
                 before it leaves the register with another value (model: compare-and-set \
                 register, never written at the start; a failed cas happened and found another \
                 value than it expected (Porcupine's reading))"
                    .to_owned()
            )]
        )
    );
    // The default is Knossos's reading.
    assert_eq!(CheckOptions::default().failed_cas, FailedCas::Knossos);
}

/// An `ok` cas found the value it expected and set its own; one that expected another value
/// than the register's is not linearizable, and the explanation names the default reading.
#[test]
fn an_ok_cas_must_find_what_it_expected() {
    let edn = "{:process 0, :type :invoke, :f :write, :value 1}
               {:process 0, :type :ok, :f :write, :value 1}
               {:process 1, :type :invoke, :f :cas, :value [1 2]}
               {:process 1, :type :ok, :f :cas, :value [1 2]}
               {:process 2, :type :invoke, :f :cas, :value [\"k\" [nil 5]]}
               {:process 2, :type :ok, :f :cas, :value [\"k\" [nil 5]]}
               {:process 2, :type :invoke, :f :read, :value [\"k\" nil]}
               {:process 2, :type :ok, :f :read, :value [\"k\" 5]}
               {:process 1, :type :invoke, :f :read, :value nil}
               {:process 1, :type :ok, :f :read, :value 2}";
    assert_eq!(judge(edn, &CheckOptions::default()).verdict, Verdict::Valid);
    let stale = edn.replace("[1 2]", "[3 2]");
    assert_eq!(
        outcome(&judge(&stale, &CheckOptions::default())),
        (
            Verdict::Invalid,
            vec![(
                ViolationKind::NotLinearizable,
                vec![2, 3],
                "key \"register\": no order of its 3 operations that respects real time \
                 explains the operation invoked at index 2; every order placing the operations \
                 before it leaves the register with another value (model: compare-and-set \
                 register, never written at the start; a failed cas never happened (Knossos's \
                 reading))"
                    .to_owned()
            )]
        )
    );
}

/// Knossos's `ok` read of `nil` is an unknown value: it matches whatever the register holds,
/// even a value nobody wrote could not be claimed by it. A read of a value nobody wrote is
/// still caught, and in JSON Lines a read without a value still means "never written".
#[test]
fn a_nil_read_matches_anything() {
    let edn = "{:process 0, :type :invoke, :f :write, :value 1}
               {:process 0, :type :ok, :f :write, :value 1}
               {:process 1, :type :invoke, :f :read, :value nil}
               {:process 1, :type :ok, :f :read, :value nil}
               {:process 0, :type :invoke, :f :write, :value 2}
               {:process 0, :type :ok, :f :write, :value 2}
               {:process 1, :type :invoke, :f :read, :value nil}
               {:process 1, :type :ok, :f :read, :value nil}";
    assert_eq!(
        outcome(&judge(edn, &CheckOptions::default())),
        (Verdict::Valid, vec![])
    );
    let ghost = edn.replacen(":ok, :f :read, :value nil", ":ok, :f :read, :value 3", 1);
    assert_eq!(
        judge(&ghost, &CheckOptions::default()).kinds(),
        [ViolationKind::NotLinearizable]
    );
    let jsonl = concat!(
        r#"{"record":"op","index":0,"time_ns":0,"mono_ms":0,"wall_ms":0,"process":0,"node":"c","type":"invoke","f":"write","key":"k","value":"1"}"#,
        "\n",
        r#"{"record":"op","index":1,"time_ns":1,"mono_ms":0,"wall_ms":0,"process":0,"node":"c","type":"ok","f":"write","key":"k","value":"1"}"#,
        "\n",
        r#"{"record":"op","index":2,"time_ns":2,"mono_ms":0,"wall_ms":0,"process":1,"node":"c","type":"invoke","f":"read","key":"k"}"#,
        "\n",
        r#"{"record":"op","index":3,"time_ns":3,"mono_ms":0,"wall_ms":0,"process":1,"node":"c","type":"ok","f":"read","key":"k"}"#,
        "\n",
    );
    let never_written = check_with(
        &read_jsonl(jsonl.as_bytes()).unwrap(),
        &CheckOptions::default(),
    );
    assert_eq!(never_written.kinds(), [ViolationKind::NotLinearizable]);
    let unknown = jsonl.replace(
        r#""type":"ok","f":"read","key":"k""#,
        r#""type":"ok","f":"read","key":"k","value_unknown":true"#,
    );
    let unknown = check_with(
        &read_jsonl(unknown.as_bytes()).unwrap(),
        &CheckOptions::default(),
    );
    assert_eq!(unknown.verdict, Verdict::Valid);
}

/// With an initial value the register holds it before any operation: a first read of 0 and a
/// cas from 0 are explained only then.
#[test]
fn the_initial_value_is_the_registers_first_state() {
    let edn = "{:process 0, :type :invoke, :f :read, :value nil}
               {:process 0, :type :ok, :f :read, :value 0}
               {:process 1, :type :invoke, :f :cas, :value [0 4]}
               {:process 1, :type :ok, :f :cas, :value [0 4]}
               {:process 0, :type :invoke, :f :read, :value nil}
               {:process 0, :type :ok, :f :read, :value 4}";
    let zero = judge(edn, &with(FailedCas::Knossos, Some("0")));
    assert_eq!(outcome(&zero), (Verdict::Valid, vec![]));
    let empty = judge(edn, &with(FailedCas::Knossos, None));
    assert_eq!(empty.kinds(), [ViolationKind::NotLinearizable]);
    assert_eq!(empty.violations[0].witnesses, [0, 1]);
    let one = judge(edn, &with(FailedCas::Knossos, Some("1")));
    assert!(
        one.violations[0]
            .explanation
            .contains("(model: compare-and-set register, initial value \"1\"; a failed cas"),
        "{:?}",
        one.violations
    );
}

/// Two processes whose acquires both completed `ok` with no release between them: not a
/// mutex. Without a lock model the same history is not judged as one, and says so.
#[test]
fn two_acquires_without_a_release_are_not_a_mutex() {
    let edn = "[{:process 0, :type :invoke, :f :acquire}
                {:process 0, :type :ok, :f :acquire}
                {:process 1, :type :invoke, :f :acquire}
                {:process 1, :type :ok, :f :acquire}
                {:process 0, :type :invoke, :f :release}
                {:process 0, :type :ok, :f :release}]";
    assert_eq!(
        outcome(&judge(edn, &lock_model(LockModel::Mutex))),
        (
            Verdict::Invalid,
            vec![(
                ViolationKind::NotLinearizable,
                vec![2, 3],
                "lock \"lock\": no order of its 3 acquires and releases that respects real time \
                 explains the operation invoked at index 2 as a mutex (Knossos's model/mutex: an \
                 acquire of a held lock or a release of a free one is impossible); failed \
                 operations never happened, and ones whose outcome is unknown may have taken \
                 effect at any time after their invoke, or never"
                    .to_owned()
            )]
        )
    );
    // Without the model nothing in it can be judged (no tokens, no service events): unknown.
    let unjudged = judge(edn, &CheckOptions::default());
    assert_eq!(unjudged.verdict, Verdict::Unknown);
    assert!(
        unjudged.not_checked.contains(
            &"mutual exclusion from operations: the history does not say its locks have no \
              expiry (a lease that expires is acquired again without a release) nor what TTL its \
              acquires asked for; give the lock model (fencesim check --model mutex or \
              fenced-mutex) to judge them as a mutex, or record each acquire's and renewal's TTL \
              (`ttl_ms`; EDN `:ttl-ms`) to judge them as leases"
                .to_owned()
        ),
        "{:?}",
        unjudged.not_checked
    );
}

/// Operations whose outcome is unknown never convict. Process 0's acquire timed out (`info`)
/// before process 1 acquired: a rule that counts it as held would see two holders, but it may
/// never have taken effect. Process 1's release and process 2's acquire overlap, so the
/// release may come first. Process 2's release is `info` too, and process 3 acquires after
/// it: that release may have taken effect in time.
#[test]
fn info_and_concurrent_lock_operations_are_judged_soundly() {
    let edn = "{:process 0, :type :invoke, :f :acquire}
               {:process 0, :type :info, :f :acquire, :error :timeout}
               {:process 1, :type :invoke, :f :acquire}
               {:process 1, :type :ok, :f :acquire}
               {:process 1, :type :invoke, :f :release}
               {:process 2, :type :invoke, :f :acquire}
               {:process 1, :type :ok, :f :release}
               {:process 2, :type :ok, :f :acquire}
               {:process 2, :type :invoke, :f :release}
               {:process 2, :type :info, :f :release}
               {:process 3, :type :invoke, :f :release}
               {:process 3, :type :fail, :f :release, :error :not-held}
               {:process 3, :type :invoke, :f :acquire}
               {:process 3, :type :ok, :f :acquire}";
    for model in [LockModel::Mutex, LockModel::FencedMutex] {
        assert_eq!(
            outcome(&judge(edn, &lock_model(model))),
            (Verdict::Valid, vec![]),
            "{model:?}"
        );
    }
}

/// The fenced mutex: each `ok` acquire's fence must exceed every earlier one's. A fence
/// handed out twice is fine for a plain mutex and not for a fenced one.
#[test]
fn fences_must_grow_under_the_fenced_mutex() {
    let edn = "{:process 0, :type :invoke, :f :acquire, :value [\"l\" nil]}
               {:process 0, :type :ok, :f :acquire, :value [\"l\" 1]}
               {:process 0, :type :invoke, :f :release, :value [\"l\" 1]}
               {:process 0, :type :ok, :f :release, :value [\"l\" 1]}
               {:process 1, :type :invoke, :f :acquire, :value [\"l\" nil]}
               {:process 1, :type :ok, :f :acquire, :value [\"l\" 1]}";
    // The reused token is a violation of its own (token-reused); not a mutex one.
    let plain = judge(edn, &lock_model(LockModel::Mutex));
    assert_eq!(plain.kinds(), [ViolationKind::TokenReused]);
    let fenced = judge(edn, &lock_model(LockModel::FencedMutex));
    assert_eq!(
        fenced.kinds(),
        [ViolationKind::TokenReused, ViolationKind::NotLinearizable]
    );
    let fenced: Vec<_> = fenced
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::NotLinearizable)
        .collect();
    assert_eq!(fenced[0].witnesses, [4, 5]);
    assert!(
        fenced[0]
            .explanation
            .contains("explains the operation invoked at index 4 as a fenced mutex"),
        "{}",
        fenced[0].explanation
    );
    let grows = edn.replacen(
        "1, :type :ok, :f :acquire, :value [\"l\" 1]",
        "1, :type :ok, :f :acquire, :value [\"l\" 2]",
        1,
    );
    assert_eq!(
        judge(&grows, &lock_model(LockModel::FencedMutex)).verdict,
        Verdict::Valid,
        "{grows}"
    );
}

/// Acquires that carry their TTL (`:ttl-ms`, times in ns) are judged as leases from the
/// operations alone: a second node's acquire that certainly took effect while the first's
/// lease certainly lived, with no release of it, is a violation; one after the TTL, one after
/// a release was invoked, an `info` one, and one concurrent with the first are not.
#[test]
fn leases_with_ttls_are_judged_from_operations_alone() {
    // a: acquired 0..10 ms with TTL 1000 ms: held until at least 1.000 s.
    let a = "{:process 0, :type :invoke, :f :acquire, :value [\"l\" nil], :ttl-ms 1000, :time 0, :node \"a\"}
             {:process 0, :type :ok, :f :acquire, :value [\"l\" 1], :ttl-ms 1000, :time 10000000, :node \"a\"}";
    let b = |invoke_ms: u64, ok_ms: u64, done: &str| {
        format!(
            "{{:process 1, :type :invoke, :f :acquire, :value [\"l\" nil], :ttl-ms 1000, :time {}, :node \"b\"}}\n\
             {{:process 1, :type :{done}, :f :acquire, :value [\"l\" 2], :ttl-ms 1000, :time {}, :node \"b\"}}",
            invoke_ms * 1_000_000,
            ok_ms * 1_000_000
        )
    };
    let result = judge(
        &format!("{a}\n{}", b(500, 520, "ok")),
        &CheckOptions::default(),
    );
    assert_eq!(
        outcome(&result),
        (
            Verdict::Invalid,
            vec![(
                ViolationKind::MutualExclusionClient,
                vec![0, 2, 3],
                "lock \"l\": a acquired it at index 1 (TTL 1000 ms, so held until at least \
                 1.000 s with no release), yet b acquired it too, invoked at index 2 and ok at \
                 index 3 (0.520 s); judged from client operations alone"
                    .to_owned()
            )]
        )
    );
    assert!(
        !result.not_checked.iter().any(|l| {
            l.starts_with("mutual-exclusion-client") || l.starts_with("mutual exclusion from")
        }),
        "{:?}",
        result.not_checked
    );
    // After the TTL; unknown outcome; concurrent with a's acquire: nothing proven.
    for (b_ops, why) in [
        (b(1000, 1010, "ok"), "after the TTL"),
        (b(500, 520, "info"), "an info acquire"),
        (b(5, 520, "ok"), "invoked before a's ok"),
    ] {
        let result = judge(&format!("{a}\n{b_ops}"), &CheckOptions::default());
        assert_eq!(
            result.verdict,
            Verdict::Valid,
            "{why}: {:?}",
            result.violations
        );
    }
    // A release invoked before b's acquire ends a's certain window, even if unanswered.
    let release =
        "{:process 0, :type :invoke, :f :release, :value [\"l\" 1], :time 400000000, :node \"a\"}";
    let result = judge(
        &format!("{a}\n{release}\n{}", b(500, 520, "ok")),
        &CheckOptions::default(),
    );
    assert_eq!(result.verdict, Verdict::Valid, "{:?}", result.violations);
    // A renewal that completed while the lease lived extends it past the first TTL.
    let renew = "{:process 0, :type :invoke, :f :renew, :value [\"l\" 1], :ttl-ms 1000, :time 900000000, :node \"a\"}
                 {:process 0, :type :ok, :f :renew, :value [\"l\" 1], :ttl-ms 1000, :time 910000000, :node \"a\"}";
    let result = judge(
        &format!("{a}\n{renew}\n{}", b(1200, 1210, "ok")),
        &CheckOptions::default(),
    );
    assert_eq!(result.kinds(), [ViolationKind::MutualExclusionClient]);
    // A TTL without the operations' times is refused, located.
    let err = read_jepsen_edn(
        "{:process 0, :type :invoke, :f :acquire, :value [\"l\" nil], :ttl-ms 1000}\n",
        "x",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 1: field :ttl-ms: a lease's TTL needs the operation's :time (ns) too"
    );
}

/// A dozen unanswered writes beside a dozen reads: only the writes whose values a read saw
/// can matter, so the search is small, where every order of twelve pending writes was not
/// (10,000,000 steps without a verdict before). A read of an unanswered write's value is
/// still explained by it.
#[test]
fn unanswered_writes_nobody_saw_do_not_blow_up_the_search() {
    let mut lines = Vec::new();
    for p in 0..12 {
        lines.push(format!(
            "{{:process {p}, :type :invoke, :f :write, :value {}}}",
            p + 1
        ));
        lines.push(format!(
            "{{:process {}, :type :invoke, :f :read, :value nil}}",
            p + 100
        ));
    }
    for p in 0..12 {
        lines.push(format!(
            "{{:process {p}, :type :info, :f :write, :value {}}}",
            p + 1
        ));
        let seen = if p == 11 { 5 } else { 0 };
        lines.push(format!(
            "{{:process {}, :type :ok, :f :read, :value {seen}}}",
            p + 100
        ));
    }
    let options = CheckOptions {
        linearizability_steps: 10_000,
        initial_value: Some("0".into()),
        ..CheckOptions::default()
    };
    let result = judge(&lines.join("\n"), &options);
    assert_eq!(result.verdict, Verdict::Valid, "{:?}", result.unknown);
    // A read of a value nobody wrote stays a violation (proving it visits every subset of the
    // identical reads, so it gets the default budget).
    let bad = lines
        .join("\n")
        .replace(":ok, :f :read, :value 5", ":ok, :f :read, :value 99");
    let options = CheckOptions {
        initial_value: Some("0".into()),
        ..CheckOptions::default()
    };
    assert_eq!(judge(&bad, &options).verdict, Verdict::Invalid);
}
