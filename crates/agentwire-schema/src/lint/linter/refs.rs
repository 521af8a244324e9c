//! Reference rules: every `$ref` and `discriminator.mapping` target must resolve inside the
//! document (a target in another document is reported as external).

use serde_json::{Map, Value};

use super::{Linter, RefTarget};
use crate::lint::LintCode;
use crate::pointer;

impl Linter<'_> {
    pub(super) fn check_ref(&mut self, at: &str, map: &Map<String, Value>) {
        let Some(reference) = map.get("$ref") else {
            return;
        };
        let here = pointer::push(at, "$ref");
        let Value::String(reference) = reference else {
            self.push(
                LintCode::MalformedKeyword,
                here,
                "$ref must be a string".to_owned(),
            );
            return;
        };
        self.report_ref(here, reference);
    }

    fn report_ref(&mut self, here: String, reference: &str) {
        match self.resolve(reference) {
            RefTarget::Pointer(_) => {}
            RefTarget::External => self.push(
                LintCode::ExternalRef,
                here,
                format!("{reference:?} points into another document; only references inside this document are followed"),
            ),
            RefTarget::Unresolved(why) => {
                self.push(LintCode::UnresolvedRef, here, format!("{reference:?} {why}"));
            }
        }
    }

    pub(super) fn check_discriminator(&mut self, at: &str, map: &Map<String, Value>) {
        let Some(Value::Object(mapping)) = map.get("discriminator").and_then(|d| d.get("mapping"))
        else {
            return;
        };
        let base = pointer::push(&pointer::push(at, "discriminator"), "mapping");
        for (name, target) in mapping {
            let here = pointer::push(&base, name);
            match target {
                Value::String(reference) => self.report_ref(here, reference),
                _ => self.push(
                    LintCode::MalformedKeyword,
                    here,
                    "a discriminator mapping value must be a reference string".to_owned(),
                ),
            }
        }
    }
}
