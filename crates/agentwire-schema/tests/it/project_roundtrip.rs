//! The round trip over generated messages: export every version of a multi-version schema,
//! generate messages of each version, check them against that version's export, project them
//! down to every older version and check them again under the older export.

use std::sync::OnceLock;

use agentwire_schema::fast::sample::{Generator, Rng, Size};
use agentwire_schema::versions::export_version;
use agentwire_schema::{ProjectErrorKind, ProjectTarget, Projector, SchemaDocument, Validator};
use proptest::prelude::*;
use serde_json::Value;

use crate::support::staged_runtime;

const VERSIONS: [&str; 6] = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"];

struct Fixture {
    doc: SchemaDocument,
    exports: Vec<SchemaDocument>,
    validators: Vec<Validator>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let doc = staged_runtime();
        let exports: Vec<SchemaDocument> = VERSIONS
            .iter()
            .map(|v| {
                SchemaDocument::from_value(export_version(&doc, v).expect("export")).expect("loads")
            })
            .collect();
        let validators = exports
            .iter()
            .map(|e| e.validator().expect("compiles"))
            .collect();
        Fixture {
            doc,
            exports,
            validators,
        }
    })
}

/// A valid message of version `VERSIONS[from]`: generated from that version's export, retried
/// with the next seed until the validator accepts it.
fn message(from: usize, seed: u64) -> Value {
    let f = fixture();
    let generator = Generator::new(&f.exports[from], Size::Small);
    let mut rng = Rng::new(seed);
    for _ in 0..64 {
        let candidate = generator.instance("", &mut rng);
        if f.validators[from].is_valid(&candidate) {
            return candidate;
        }
    }
    panic!("no valid {} message from seed {seed}", VERSIONS[from]);
}

/// Whether the message contains something version `to` does not have (so projection may refuse).
fn refusal_is_expected(kind: ProjectErrorKind) -> bool {
    matches!(
        kind,
        ProjectErrorKind::VariantUnavailable | ProjectErrorKind::ValueUnavailable
    )
}

#[test]
fn generated_messages_validate_under_their_own_export() {
    let f = fixture();
    for (i, _) in VERSIONS.iter().enumerate() {
        for seed in 0..50 {
            let m = message(i, seed);
            assert!(f.validators[i].is_valid(&m));
        }
    }
}

#[test]
#[allow(clippy::needless_range_loop)] // `from` and `to` index versions, exports and validators alike
fn every_pair_of_versions_projects_most_messages() {
    let f = fixture();
    for from in 0..VERSIONS.len() {
        for to in 0..=from {
            let projector =
                Projector::new(&f.doc, VERSIONS[from], VERSIONS[to], ProjectTarget::Root)
                    .expect("projector");
            let (mut ok, mut refused) = (0, 0);
            for seed in 0..40 {
                match projector.project(&message(from, seed)) {
                    Ok(p) => {
                        assert!(
                            f.validators[to].is_valid(&p),
                            "{} -> {}: {p}",
                            VERSIONS[from],
                            VERSIONS[to]
                        );
                        ok += 1;
                    }
                    Err(e) => {
                        assert!(
                            refusal_is_expected(e.kind),
                            "{} -> {}: {e}",
                            VERSIONS[from],
                            VERSIONS[to]
                        );
                        refused += 1;
                    }
                }
            }
            if from == to {
                assert_eq!(
                    refused, 0,
                    "projecting {} onto itself refuses nothing",
                    VERSIONS[from]
                );
            }
            assert!(
                ok > 0,
                "{} -> {}: nothing projected",
                VERSIONS[from],
                VERSIONS[to]
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Projection either yields a message valid under the target export, or refuses because the
    /// message carries a variant or value the target does not have; and a refused message is
    /// indeed not valid under the target export as it is.
    #[test]
    fn projection_then_validation_succeeds(seed in any::<u64>(), from in 0usize..6, down in 0usize..6) {
        let f = fixture();
        let to = from.saturating_sub(down);
        let m = message(from, seed);
        let projector = Projector::new(&f.doc, VERSIONS[from], VERSIONS[to], ProjectTarget::Root).expect("projector");
        match projector.project(&m) {
            Ok(p) => {
                prop_assert!(f.validators[to].is_valid(&p), "{} -> {}: {}", VERSIONS[from], VERSIONS[to], p);
                // Projecting again is the identity: the result already belongs to `to`.
                let again = Projector::new(&f.doc, VERSIONS[to], VERSIONS[to], ProjectTarget::Root).expect("projector");
                prop_assert_eq!(again.project(&p).expect("idempotent"), p);
            }
            Err(e) => {
                prop_assert!(refusal_is_expected(e.kind), "{}", e);
                prop_assert!(!f.validators[to].is_valid(&m));
            }
        }
    }
}
