//! The one macro behind every wire registry of the protocol (methods, server requests, features,
//! error codes): an enum of the entries with their wire names and the version that added each.

/// Declares a registry enum. Each entry is `Variant = WIRE since VERSION`, where `WIRE` is any
/// `&'static str` constant expression; the enum gets `ALL` (registry order), `as_str`, `since`,
/// `from_wire`, `is_available` and `Display`.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $wire:expr, since $since:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// Every value, in registry order.
            pub const ALL: [$name; [$($wire),+].len()] = [$($name::$variant),+];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }

            /// The first version that has it.
            pub fn since(self) -> $crate::version::ProtocolVersion {
                match self { $($name::$variant => $crate::version::ProtocolVersion::$since),+ }
            }

            /// Looks a wire name up (in any version).
            pub fn from_wire(name: &str) -> Option<$name> {
                $name::ALL.into_iter().find(|m| m.as_str() == name)
            }

            /// Whether `version` has it.
            pub fn is_available(self, version: $crate::version::ProtocolVersion) -> bool {
                self.since() <= version
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use wire_enum;
