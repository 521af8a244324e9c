//! The method table: every client-to-runtime method of the protocol, declared once with its wire
//! name, the version that added it, its params and result types, its kind and the feature it
//! needs. The `Method` registry, the typed `MethodParams`/`MethodResult`, the per-method marker
//! types of [`request`], the parse dispatch and the method table of `docs/roll-runtime.md` all come
//! from this one table.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::generated::*;
use crate::parse::{ParseError, checked, definition_stem};
use crate::registry::wire_enum;
use crate::version::{Feature, ProtocolVersion};

/// How a method behaves on retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MethodKind {
    /// Carries a `requestId` and is de-duplicated by it: a retry returns the first result.
    Mutation,
    /// A read the official client retries once when the error is `retryable`.
    RetryableRead,
    /// Neither: session set-up, replay and reads the client does not retry.
    Other,
}

impl MethodKind {
    /// The name used in the docs table.
    pub fn as_str(self) -> &'static str {
        match self {
            MethodKind::Mutation => "mutation",
            MethodKind::RetryableRead => "retryable read",
            MethodKind::Other => "",
        }
    }
}

/// A method as a type, for typed calls: its wire entry and the Rust types of its params and
/// result. The marker types live in [`request`].
pub trait RollMethod {
    /// The registry entry.
    const METHOD: Method;
    /// The params the method takes.
    type Params: Serialize + DeserializeOwned;
    /// The result it answers with.
    type Result: Serialize + DeserializeOwned;
}

/// `Box<T>` for results declared `(boxed)` in the table (large snapshots), `T` otherwise.
macro_rules! result_slot {
    ($ty:ident boxed) => { Box<$ty> };
    ($ty:ident) => { $ty };
}

/// `Some(feature)` for methods declared `needs FEATURE`, `None` otherwise.
macro_rules! feature_slot {
    ($feature:ident) => {
        Some(Feature::$feature)
    };
    () => {
        None
    };
}

macro_rules! roll_methods {
    ($(
        $(#[$doc:meta])*
        $variant:ident($handler:ident) = $wire:literal, since $since:ident,
        $params:ident => $result:ident $(($boxed:ident))?,
        $kind:ident $(, needs $feature:ident)?;
    )+) => {
        wire_enum! {
            /// A client-to-runtime method.
            Method { $($variant = $wire, since $since),+ }
        }

        impl Method {
            /// How the method behaves on retry.
            pub fn kind(self) -> MethodKind {
                match self { $(Method::$variant => MethodKind::$kind),+ }
            }

            /// The feature a runtime must announce before the method may be called.
            pub fn required_feature(self) -> Option<Feature> {
                match self { $(Method::$variant => feature_slot!($($feature)?)),+ }
            }

            /// The Rust type of the params, as named in the docs table.
            pub fn params_type_name(self) -> &'static str {
                match self { $(Method::$variant => stringify!($params)),+ }
            }

            /// The Rust type of the result, as named in the docs table.
            pub fn result_type_name(self) -> &'static str {
                match self { $(Method::$variant => stringify!($result)),+ }
            }

            fn decode_params(
                self,
                version: ProtocolVersion,
                definition: &str,
                params: &Value,
            ) -> Result<MethodParams, ParseError> {
                Ok(match self {
                    $(Method::$variant => MethodParams::$variant(checked(version, definition, params)?)),+
                })
            }

            fn decode_result(
                self,
                version: ProtocolVersion,
                definition: &str,
                result: &Value,
            ) -> Result<MethodResult, ParseError> {
                Ok(match self {
                    $(Method::$variant => MethodResult::$variant(checked(version, definition, result)?)),+
                })
            }
        }

        /// Typed params of a client request, one variant per method; serializes as the params.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum MethodParams { $($(#[$doc])* $variant($params)),+ }

        impl MethodParams {
            /// The method these params belong to.
            pub fn method(&self) -> Method {
                match self { $(MethodParams::$variant(_) => Method::$variant),+ }
            }

            /// Calls the handler's method of these params and types its result: the server's
            /// one dispatch, generated from the table.
            ///
            /// # Errors
            /// What the handler's method answers.
            pub async fn dispatch<H: RollHandler>(self, handler: &H) -> Result<MethodResult, H::Error> {
                Ok(match self {
                    $(MethodParams::$variant(params) => MethodResult::$variant(handler.$handler(params).await?)),+
                })
            }
        }

        /// The server side of the method table: one method per client request, taking its typed
        /// params and answering its typed result or the server's error. [`MethodParams::dispatch`]
        /// calls them.
        pub trait RollHandler: Sync {
            /// A refusal, as the server answers it.
            type Error: Send;
            $(
                $(#[$doc])*
                fn $handler(
                    &self,
                    params: $params,
                ) -> impl std::future::Future<Output = Result<result_slot!($result $($boxed)?), Self::Error>> + Send;
            )+
        }

        /// Typed result of a client request, one variant per method; serializes as the result.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum MethodResult { $($(#[$doc])* $variant(result_slot!($result $($boxed)?))),+ }

        impl MethodResult {
            /// The method this result answers.
            pub fn method(&self) -> Method {
                match self { $(MethodResult::$variant(_) => Method::$variant),+ }
            }
        }

        /// One marker type per method, for typed calls (`RollMethod::Params`, `::Result`).
        pub mod request {
            use super::{Method, RollMethod};
            $(
                $(#[$doc])*
                #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
                pub struct $variant;

                impl RollMethod for $variant {
                    const METHOD: Method = Method::$variant;
                    type Params = super::$params;
                    type Result = super::$result;
                }
            )+
        }
    };
}

roll_methods! {
    /// `initialize`: version negotiation; first and once.
    Initialize(initialize) = "initialize", since V1_0,
        InitializeParams => InitializeResult, Other;
    /// `client.capabilities.set`: the server requests the client handles, with a revision.
    ClientCapabilitiesSet(client_capabilities_set) = "client.capabilities.set", since V1_2,
        ClientCapabilitiesSetParams => ClientCapabilitiesSetResult, Other;
    /// `thread.list`: threads, paged.
    ThreadList(thread_list) = "thread.list", since V1_0,
        ThreadListParams => ThreadListResult, RetryableRead;
    /// `thread.create`.
    ThreadCreate(thread_create) = "thread.create", since V1_0,
        ThreadCreateParams => ThreadCreateResult, Mutation;
    /// `thread.open`: attach to a thread and get its snapshot.
    ThreadOpen(thread_open) = "thread.open", since V1_0,
        ThreadOpenParams => ThreadOpenResult (boxed), Other;
    /// `thread.snapshot`: a thread's state, paged (a recovery projection from 1.3).
    ThreadSnapshot(thread_snapshot) = "thread.snapshot", since V1_0,
        ThreadSnapshotParams => ThreadSnapshotResult (boxed), RetryableRead;
    /// `thread.rename`.
    ThreadRename(thread_rename) = "thread.rename", since V1_0,
        ThreadRenameParams => ThreadRenameResult, Mutation;
    /// `thread.delete`.
    ThreadDelete(thread_delete) = "thread.delete", since V1_0,
        ThreadDeleteParams => ThreadDeleteResult, Mutation;
    /// `thread.detach`: stop receiving a thread's events.
    ThreadDetach(thread_detach) = "thread.detach", since V1_0,
        ThreadDetachParams => ThreadDetachResult, Mutation;
    /// `thread.capabilities`: what the thread's agent offers.
    ThreadCapabilities(thread_capabilities) = "thread.capabilities", since V1_0,
        ThreadCapabilitiesParams => ThreadCapabilitiesResult, RetryableRead;
    /// `runtime.events.resume`: replay strictly after a cursor, then the barrier.
    RuntimeEventsResume(runtime_events_resume) = "runtime.events.resume", since V1_3,
        RuntimeEventsResumeParams => RuntimeEventsResumeResult, Other;
    /// `turn.start`.
    TurnStart(turn_start) = "turn.start", since V1_0,
        TurnStartParams => TurnStartResult, Mutation;
    /// `turn.cancel`.
    TurnCancel(turn_cancel) = "turn.cancel", since V1_0,
        TurnCancelParams => TurnCancelResult, Mutation;
    /// `approval.respond`: the 1.0 write path of approvals (`CAPABILITY_UNAVAILABLE` from 1.1).
    ApprovalRespond(approval_respond) = "approval.respond", since V1_0,
        ApprovalRespondParams => ApprovalRespondResult, Mutation;
    /// `operation.get`: one tool operation's view.
    OperationGet(operation_get) = "operation.get", since V1_0,
        OperationGetParams => OperationGetResult, RetryableRead;
    /// `operation.result.get`: a stored app-output result.
    OperationResultGet(operation_result_get) = "operation.result.get", since V1_5,
        OperationResultGetParams => OperationResultGetResult, Other, needs AppOutput;
    /// `attachment.stage`: from a local path or for chunked upload.
    AttachmentStage(attachment_stage) = "attachment.stage", since V1_4,
        AttachmentStageParams => AttachmentStageResult, Mutation, needs Attachments;
    /// `attachment.chunk`: one chunk of a chunked upload.
    AttachmentChunk(attachment_chunk) = "attachment.chunk", since V1_4,
        AttachmentChunkParams => AttachmentChunkResult, Mutation, needs Attachments;
    /// `attachment.commit`: size and sha256 verified.
    AttachmentCommit(attachment_commit) = "attachment.commit", since V1_4,
        AttachmentCommitParams => AttachmentCommitResult, Mutation, needs Attachments;
    /// `attachment.release`.
    AttachmentRelease(attachment_release) = "attachment.release", since V1_4,
        AttachmentReleaseParams => AttachmentReleaseResult, Mutation, needs Attachments;
}

impl Method {
    /// Whether the method carries a `requestId` and is de-duplicated by it.
    pub fn is_idempotent_mutation(self) -> bool {
        self.kind() == MethodKind::Mutation
    }

    /// Reads the official client retries once when the error is `retryable`.
    pub fn is_retryable_read(self) -> bool {
        self.kind() == MethodKind::RetryableRead
    }

    /// Whether a runtime of `version` serves the method (present in the registry and not
    /// answered `CAPABILITY_UNAVAILABLE`, as `approval.respond` is from 1.1 on).
    pub fn is_served(self, version: ProtocolVersion) -> bool {
        let answered_unavailable =
            self == Method::ApprovalRespond && !version.capabilities().client_approval_responses;
        self.is_available(version) && !answered_unavailable
    }

    /// The schema definition of the params (`thread.list` → `threadListParams`).
    pub fn params_definition(self) -> String {
        format!("{}Params", definition_stem(self.as_str()))
    }

    /// The schema definition of the result (`thread.list` → `threadListResult`).
    pub fn result_definition(self) -> String {
        format!("{}Result", definition_stem(self.as_str()))
    }

    /// Validates `params` against this method's definition in `version` and types them.
    pub fn parse_params(
        self,
        version: ProtocolVersion,
        params: &Value,
    ) -> Result<MethodParams, ParseError> {
        self.available_in(version)?;
        self.decode_params(version, &self.params_definition(), params)
    }

    /// Validates `result` against this method's definition in `version` and types it.
    pub fn parse_result(
        self,
        version: ProtocolVersion,
        result: &Value,
    ) -> Result<MethodResult, ParseError> {
        self.available_in(version)?;
        self.decode_result(version, &self.result_definition(), result)
    }

    fn available_in(self, version: ProtocolVersion) -> Result<(), ParseError> {
        if self.is_available(version) {
            Ok(())
        } else {
            Err(ParseError::UnknownMethod {
                method: self.as_str().to_owned(),
                version,
            })
        }
    }
}
