//! JSON Schemas of the types with hand-written wire formats (feature `schema`): ids, instants,
//! spans and signatures. Each states exactly what its `Serialize` writes and its `Deserialize`
//! reads; the derived schemas of the structs and enums that carry them follow their serde
//! attributes. Tool definitions (the MCP server's inputs) are generated from these, so every
//! schema token is paid for in every request of an agent runtime: they stay short.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use crate::actor::Actor;
use crate::identity::Signature;
use crate::ids::{
    AgentId, CheckId, CriterionId, DecisionScope, EffectId, EvidenceId, Fingerprint, GateId,
    GoalId, ObligationId, ObservationKey, OperationId, PersonId, Revision, SourceId, Subject,
    TodoId, TurnId,
};
use crate::time::{Duration, Timestamp};

/// The id grammar as a regular expression (see [`crate::ids`]).
pub const ID_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._:/@#+=-]{0,127}$";

/// Every id kind shares one definition, `Id`: one grammar, written once per tool schema.
macro_rules! id_schema {
    ($($name:ident),* $(,)?) => {$(
        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed("Id")
            }

            fn schema_id() -> Cow<'static, str> {
                Cow::Borrowed("loopx_kernel::Id")
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({ "type": "string", "pattern": ID_PATTERN })
            }
        }
    )*};
}

id_schema!(
    GoalId,
    TodoId,
    GateId,
    CriterionId,
    EvidenceId,
    ObligationId,
    TurnId,
    EffectId,
    AgentId,
    PersonId,
    SourceId,
    OperationId,
    Subject,
    Revision,
    CheckId,
    ObservationKey,
    Fingerprint,
    DecisionScope,
);

impl JsonSchema for Timestamp {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Timestamp")
    }

    fn schema_id() -> Cow<'static, str> {
        Cow::Borrowed("loopx_kernel::Timestamp")
    }

    /// RFC 3339 with an offset, as [`Timestamp::parse`] reads it.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "format": "date-time" })
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Duration")
    }

    fn schema_id() -> Cow<'static, str> {
        Cow::Borrowed("loopx_kernel::Duration")
    }

    /// Whole milliseconds, never negative.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "integer", "minimum": 0, "description": "milliseconds" })
    }
}

impl JsonSchema for Signature {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Signature")
    }

    fn schema_id() -> Cow<'static, str> {
        Cow::Borrowed("loopx_kernel::Signature")
    }

    /// 64 bytes as 128 lowercase hexadecimal digits, as [`Signature::parse`] reads them.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "pattern": "^[0-9a-f]{128}$" })
    }
}

impl JsonSchema for Actor {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Actor")
    }

    fn schema_id() -> Cow<'static, str> {
        Cow::Borrowed("loopx_kernel::Actor")
    }

    /// `{"kind": "agent", "id": "agent-a"}`: the kind and the id, adjacently tagged (what
    /// the derived schema says in five alternatives, said once).
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let id = generator.subschema_for::<AgentId>();
        json_schema!({
            "type": "object",
            "properties": {
                "kind": { "enum": ["agent", "person", "validator", "provider", "capability"] },
                "id": id,
            },
            "required": ["kind", "id"],
            "additionalProperties": false,
        })
    }
}
