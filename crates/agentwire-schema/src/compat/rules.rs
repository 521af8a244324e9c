//! The compatibility rules: every change the checker reports, its stable id and what it does
//! to the accepted instances, and the classification of that effect by direction.

use crate::compat::Direction;

/// Whether a change breaks a peer that still speaks the old schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeClass {
    /// A peer built against the old schema fails against one built against the new.
    Breaking,
    /// Old and new peers keep working together.
    Additive,
}

impl ChangeClass {
    /// `breaking` or `additive`.
    pub fn id(self) -> &'static str {
        match self {
            ChangeClass::Breaking => "breaking",
            ChangeClass::Additive => "additive",
        }
    }
}

/// What a change does to the set of instances a node accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The new schema accepts less.
    Tightens,
    /// The new schema accepts more.
    Loosens,
    /// The new schema accepts a new member (property, enum value, variant) that a receiver
    /// marked open tolerates.
    Adds,
    /// A new member that is also required: the runtime demands it and a closed host rejects it.
    TightensAndAdds,
    /// Neither a subset nor a superset (or the generated bindings lose something).
    Incompatible,
    /// Nothing changes on the wire.
    Neutral,
}

macro_rules! rules {
    ($($variant:ident => $id:literal, $effect:ident, $doc:literal;)*) => {
        /// A compatibility rule: a stable id and what the change it detects does.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Rule {
            $(#[doc = $doc] $variant,)*
        }

        impl Rule {
            /// Every rule, in documentation order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            /// The stable id of the rule.
            pub fn id(self) -> &'static str {
                match self { $(Rule::$variant => $id,)* }
            }

            /// What a change of this kind does to the accepted instances.
            pub fn effect(self) -> Effect {
                match self { $(Rule::$variant => Effect::$effect,)* }
            }

            /// One sentence saying what the rule detects.
            pub fn description(self) -> &'static str {
                match self { $(Rule::$variant => $doc,)* }
            }
        }
    };
}

rules! {
    DefinitionRemoved => "definition-removed", Incompatible, "A named definition disappeared.";
    DefinitionAdded => "definition-added", Neutral, "A new named definition.";
    VersionRemoved => "version-removed", Incompatible, "A wire version the old document carried is gone.";
    SchemaRemoved => "schema-removed", Tightens, "A subschema became `false` (nothing matches).";
    SchemaRestored => "schema-restored", Loosens, "A `false` subschema became satisfiable.";
    SchemaConstrained => "schema-constrained", Tightens, "A subschema that accepted anything gained constraints.";
    SchemaUnconstrained => "schema-unconstrained", Loosens, "A subschema became `true` (accepts anything).";
    ConstraintChanged => "constraint-changed", Incompatible, "A keyword without a finer rule (not, if/then/else, contains, propertyNames, dependencies, tuple shape, a non-schema value) changed.";
    TypeNarrowed => "type-narrowed", Tightens, "`type` accepts fewer JSON types (or appeared).";
    TypeWidened => "type-widened", Loosens, "`type` accepts more JSON types (or disappeared).";
    TypeChanged => "type-changed", Incompatible, "`type` changed to an unrelated set of types.";
    ConstChanged => "const-changed", Incompatible, "`const` changed value.";
    ConstAdded => "const-added", Tightens, "A node gained `const`.";
    ConstRemoved => "const-removed", Loosens, "A node lost `const`.";
    EnumAdded => "enum-added", Tightens, "A node gained `enum`.";
    EnumRemoved => "enum-removed", Loosens, "A node lost `enum`.";
    EnumValueRemoved => "enum-value-removed", Tightens, "An `enum` (or `const`) value is no longer accepted.";
    EnumValueAdded => "enum-value-added", Adds, "A new `enum` value.";
    RequiredAdded => "required-added", Tightens, "An existing property became required.";
    RequiredRemoved => "required-removed", Loosens, "A property is no longer required.";
    PropertyRemoved => "property-removed", Incompatible, "A property disappeared from `properties`.";
    RequiredPropertyAdded => "required-property-added", TightensAndAdds, "A new property that is also required.";
    PropertyAdded => "property-added", Adds, "A new optional property.";
    AdditionalPropertiesClosed => "additional-properties-closed", Tightens, "`additionalProperties` (or `unevaluatedProperties`) became `false`.";
    AdditionalPropertiesOpened => "additional-properties-opened", Adds, "`additionalProperties` (or `unevaluatedProperties`) is no longer `false`.";
    PatternPropertiesChanged => "pattern-properties-changed", Incompatible, "A `patternProperties` entry was added or removed.";
    LowerBoundTightened => "lower-bound-tightened", Tightens, "minimum/exclusiveMinimum/minLength/minItems/minProperties/minContains appeared or rose.";
    LowerBoundLoosened => "lower-bound-loosened", Loosens, "A lower bound disappeared or fell.";
    UpperBoundTightened => "upper-bound-tightened", Tightens, "maximum/exclusiveMaximum/maxLength/maxItems/maxProperties/maxContains appeared or fell.";
    UpperBoundLoosened => "upper-bound-loosened", Loosens, "An upper bound disappeared or rose.";
    MultipleOfTightened => "multiple-of-tightened", Tightens, "`multipleOf` appeared or became a multiple of the old one.";
    MultipleOfLoosened => "multiple-of-loosened", Loosens, "`multipleOf` disappeared or became a divisor of the old one.";
    MultipleOfChanged => "multiple-of-changed", Incompatible, "`multipleOf` changed to an unrelated factor.";
    PatternAdded => "pattern-added", Tightens, "A string gained `pattern`.";
    PatternRemoved => "pattern-removed", Loosens, "A string lost `pattern`.";
    PatternChanged => "pattern-changed", Incompatible, "`pattern` changed.";
    FormatAdded => "format-added", Tightens, "A string gained `format`.";
    FormatRemoved => "format-removed", Loosens, "A string lost `format`.";
    FormatChanged => "format-changed", Incompatible, "`format` changed.";
    UniqueItemsAdded => "unique-items-added", Tightens, "An array now requires unique items.";
    UniqueItemsRemoved => "unique-items-removed", Loosens, "An array no longer requires unique items.";
    VariantRemoved => "variant-removed", Tightens, "A `oneOf`/`anyOf` branch disappeared.";
    VariantAdded => "variant-added", Adds, "A new `oneOf`/`anyOf` branch.";
    AllOfBranchAdded => "all-of-branch-added", Tightens, "A new `allOf` branch.";
    AllOfBranchRemoved => "all-of-branch-removed", Loosens, "An `allOf` branch disappeared.";
    RefRetargeted => "ref-retargeted", Incompatible, "A `$ref` now names another definition.";
    ComparisonTooDeep => "comparison-too-deep", Incompatible, "The comparison went deeper than MAX_COMPARE_DEPTH; judged breaking to fail closed.";
}

/// Whether a change with `effect`, in a node received as `direction`, breaks.
///
/// The checker assumes the runtime upgrades first: the new schema is what the runtime speaks, the
/// old one what a lagging host speaks. What the runtime receives breaks when it tightens (an old
/// host's message is rejected); what the host receives breaks when it loosens (the new runtime
/// sends something an old host rejects), unless the change only adds a member to something the
/// old host keeps open.
pub fn classify(effect: Effect, direction: Direction, open: bool) -> ChangeClass {
    let runtime_breaks = matches!(
        effect,
        Effect::Tightens | Effect::TightensAndAdds | Effect::Incompatible
    );
    let host_breaks = match effect {
        Effect::Loosens | Effect::Incompatible => true,
        Effect::Adds | Effect::TightensAndAdds => !open,
        Effect::Tightens | Effect::Neutral => false,
    };
    let breaks = match direction {
        Direction::HostToRuntime | Direction::Unspecified => runtime_breaks,
        Direction::RuntimeToHost => host_breaks,
        Direction::Both => runtime_breaks || host_breaks,
    };
    if breaks {
        ChangeClass::Breaking
    } else {
        ChangeClass::Additive
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn classification_table() {
        use ChangeClass::{Additive as A, Breaking as B};
        use Direction::*;
        let cases = [
            (Effect::Tightens, HostToRuntime, false, B),
            (Effect::Tightens, RuntimeToHost, false, A),
            (Effect::Loosens, HostToRuntime, false, A),
            (Effect::Loosens, RuntimeToHost, false, B),
            (Effect::Adds, RuntimeToHost, false, B),
            (Effect::Adds, RuntimeToHost, true, A),
            (Effect::Adds, Both, false, B),
            (Effect::Adds, Both, true, A),
            (Effect::Adds, Unspecified, false, A),
            (Effect::TightensAndAdds, RuntimeToHost, true, A),
            (Effect::TightensAndAdds, HostToRuntime, true, B),
            (Effect::Incompatible, RuntimeToHost, true, B),
            (Effect::Neutral, Both, false, A),
        ];
        for (effect, dir, open, want) in cases {
            assert_eq!(
                classify(effect, dir, open),
                want,
                "{effect:?} {dir:?} open={open}"
            );
        }
    }

    #[test]
    fn rule_ids_are_unique_and_kebab_case() {
        let mut seen = HashSet::new();
        for rule in Rule::ALL {
            assert!(seen.insert(rule.id()), "{}", rule.id());
            assert!(
                rule.id()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'-')
            );
        }
    }
}
