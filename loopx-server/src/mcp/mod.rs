//! loopx's tools for agent runtimes over the Model Context Protocol (the official Rust SDK,
//! `rmcp`): one tool per verb an agent uses, answering the same JSON documents as the CLI's
//! `--json` for the same verb ([`crate::views`]), with refusals and errors as tool errors
//! (`isError: true`) whose content is `{code, message, hint}` (and a refusal's `details`), in
//! the CLI's words ([`loopx_kernel::words`]). A goal's state and its history are resources:
//! `loopx://goal/{id}` and `loopx://goal/{id}/log`.
//!
//! Every write goes through the kernel's one write path, signed with the key of the actor the
//! request acts for ([`Acting`]: one actor over stdio, a bearer token's over HTTP, see
//! [`http`]), at the time of the server's clock — never a time the client sends.
//!
//! ```no_run
//! # async fn run(store: std::sync::Arc<dyn loopx_kernel::seams::Store>,
//! #     clock: std::sync::Arc<dyn loopx_kernel::seams::Clock>,
//! #     acting: loopx_server::mcp::Acting) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use loopx_server::mcp::LoopxMcp;
//! // One agent over standard input and output, as `loopx mcp --as agent:NAME` runs it.
//! LoopxMcp::new(store, clock).acting_as(acting).serve_stdio().await?;
//! # Ok(()) }
//! ```

pub mod http;
mod identity;
pub mod inputs;
mod resources;

use std::sync::Arc;

use loopx_kernel::brief::Brief;
use loopx_kernel::seams::{Clock, Store, StoreError};
use loopx_kernel::{
    Actor, AgentId, Command, GoalId, GoalState, OperationId, Refusal, StoreExt as _, SubmitError,
    Submitted, Timestamp, decide, words,
};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt as _, tool, tool_handler, tool_router,
};
use serde_json::{Value, json};

pub use identity::{Acting, MIN_TOKEN_CHARS, TokenError, Tokens};
use inputs::{
    BeginInput, BlockInput, BriefInput, ClaimInput, DeferInput, DischargeInput, EvidenceAddInput,
    GateOpenInput, HandoffInput, NextInput, ObserveInput, ReadyInput, ReleaseInput, RenewInput,
    ResolveOutcomeInput, SettleInput, StatusInput,
};

use crate::views;

/// What a tool answers: its document, or a tool error.
type Answer = Result<CallToolResult, ErrorData>;

/// The tools and resources, over one store. Cheap to clone: a transport makes one per
/// session.
#[derive(Clone)]
pub struct LoopxMcp {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    acting: Option<Acting>,
    tool_router: ToolRouter<LoopxMcp>,
}

impl std::fmt::Debug for LoopxMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopxMcp")
            .field("acting", &self.acting)
            .finish_non_exhaustive()
    }
}

/// A tool's input schema as runtimes are sent it: the kernel types' definitions without their
/// Rust documentation (the tool's own arguments keep theirs), without `"default": null` on
/// optional fields, without the type beside a constant and without the `$schema` line. A runtime pays for every token of every
/// schema in every request; what is left still validates exactly the same inputs.
pub fn lean(mut schema: Value) -> Value {
    fn strip(value: &mut Value, descriptions: bool) {
        match value {
            Value::Object(map) => {
                if descriptions {
                    map.remove("description");
                }
                if map.get("default") == Some(&Value::Null) {
                    map.remove("default");
                }
                // A constant says its type.
                if map.contains_key("const") {
                    map.remove("type");
                }
                for (key, child) in map.iter_mut() {
                    // Under `properties` the keys are field names, never keywords.
                    let names = key == "properties";
                    if names {
                        if let Value::Object(fields) = child {
                            fields.values_mut().for_each(|f| strip(f, descriptions));
                        }
                    } else {
                        strip(child, descriptions);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| strip(i, descriptions)),
            _ => {}
        }
    }
    if let Some(map) = schema.as_object_mut() {
        map.remove("$schema");
        if let Some(defs) = map.get_mut("$defs") {
            strip(defs, true);
        }
    }
    strip(&mut schema, false);
    schema
}

/// A tool error: `{code, message, hint}`, and the refusal's `details` when there are any.
pub fn tool_error(code: &str, message: &str, hint: &str, details: Option<Value>) -> CallToolResult {
    let mut body = json!({ "code": code, "message": message, "hint": hint });
    if let (Some(details), Some(map)) = (details, body.as_object_mut()) {
        map.insert("details".into(), details);
    }
    CallToolResult::structured_error(body)
}

/// A failed submission as a tool error, in the CLI's words.
fn submit_failure(error: &SubmitError) -> CallToolResult {
    let (code, message, hint) = words::submit_error(error);
    let details = match error {
        SubmitError::Refused(refusal) => serde_json::to_value(refusal).ok(),
        _ => None,
    };
    tool_error(code, &message, &hint, details)
}

/// A failed read of the store as a tool error.
fn store_failure(error: &StoreError) -> CallToolResult {
    submit_failure(&SubmitError::Store(error.clone()))
}

/// The tool error of a goal the store does not hold.
fn unknown_goal() -> CallToolResult {
    submit_failure(&SubmitError::Refused(Refusal::UnknownGoal))
}

impl LoopxMcp {
    /// The tools over `store`, timing every command by `clock` (the system clock in
    /// production: a command's time is the server's, never the client's). Until
    /// [`Self::acting_as`] names an actor, each request must bring its own ([`http`]).
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        let mut tool_router = Self::tool_router();
        for route in tool_router.map.values_mut() {
            let schema = lean(Value::Object((*route.attr.input_schema).clone()));
            if let Value::Object(schema) = schema {
                route.attr.input_schema = Arc::new(schema);
            }
        }
        LoopxMcp {
            store,
            clock,
            acting: None,
            tool_router,
        }
    }

    /// The same tools, acting for one actor on every request (stdio).
    #[must_use]
    pub fn acting_as(mut self, acting: Acting) -> Self {
        self.acting = Some(acting);
        self
    }

    /// The tools' definitions (name, description, input schema), as `tools/list` answers.
    pub fn tools(&self) -> Vec<rmcp::model::Tool> {
        self.tool_router.list_all()
    }

    /// Serves over standard input and output until the client closes them.
    ///
    /// # Errors
    /// When the transport fails to start or the session ends in an error.
    pub async fn serve_stdio(self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let running = self.serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
        Ok(())
    }

    /// Who this request acts for: the instance's actor, or the one its bearer token named.
    fn acting(&self, ctx: &RequestContext<RoleServer>) -> Result<Acting, CallToolResult> {
        if let Some(acting) = &self.acting {
            return Ok(acting.clone());
        }
        ctx.extensions
            .get::<::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Acting>())
            .cloned()
            .ok_or_else(|| {
                tool_error(
                    "unauthenticated",
                    "this request acts for no one",
                    "present a bearer token the server maps to an actor",
                    None,
                )
            })
    }

    /// The agent a read is for: the one named, else the acting agent.
    fn agent(
        &self,
        ctx: &RequestContext<RoleServer>,
        named: Option<AgentId>,
    ) -> Result<AgentId, CallToolResult> {
        if let Some(agent) = named {
            return Ok(agent);
        }
        match self.acting(ctx)?.actor() {
            Actor::Agent(agent) => Ok(agent.clone()),
            other => Err(tool_error(
                "agent_missing",
                &format!("`{other}` is not an agent, and the answer is for one agent"),
                "pass `agent`, or serve as the agent (`loopx mcp --as agent:NAME`)",
                None,
            )),
        }
    }

    async fn load(&self, goal: &GoalId) -> Result<GoalState, CallToolResult> {
        match self.store.load(goal).await {
            Ok(Some(state)) => Ok(state),
            Ok(None) => Err(unknown_goal()),
            Err(error) => Err(store_failure(&error)),
        }
    }

    /// Submits `command` to `goal` as the acting actor, signed with its key, at the clock's
    /// now, under a new operation id: one atomic commit or nothing. Its document is `view`'s.
    async fn write(
        &self,
        ctx: &RequestContext<RoleServer>,
        goal: &GoalId,
        command: &Command,
        view: impl FnOnce(&Submitted, Timestamp) -> Value,
    ) -> Answer {
        let acting = match self.acting(ctx) {
            Ok(acting) => acting,
            Err(error) => return Ok(error),
        };
        let now = self.clock.now();
        let Ok(operation) = OperationId::new(format!("mcp-{}", uuid::Uuid::now_v7())) else {
            return Ok(tool_error("operation_id", "no operation id", "", None));
        };
        let mut handle = self.store.goal(goal).paced(&*self.clock);
        if let Some(signer) = acting.signer() {
            handle = handle.signed_by(signer);
        }
        Ok(
            match handle
                .submit_operation(acting.actor(), now, command, &operation)
                .await
            {
                Ok(done) => CallToolResult::structured(view(&done, now)),
                Err(error) => submit_failure(&error),
            },
        )
    }
}

/// Turns a read's outcome into the answer: its document, or its tool error.
fn answered(read: Result<Value, CallToolResult>) -> CallToolResult {
    read.map_or_else(|error| error, CallToolResult::structured)
}

#[tool_router]
impl LoopxMcp {
    /// `brief`: the Markdown for the session's context, the JSON as structured content.
    #[tool(
        description = "What a fresh session must know: goal, criteria, assignment and why, waits, budget, handoff note. Across goals without `goal`."
    )]
    async fn brief(
        &self,
        Parameters(input): Parameters<BriefInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let agent = match self.agent(&ctx, input.agent) {
            Ok(agent) => agent,
            Err(error) => return Ok(error),
        };
        let now = self.clock.now();
        let brief = match &input.goal {
            Some(goal) => match self.load(goal).await {
                Ok(state) => Brief::of_goal(&state, &agent, now),
                Err(error) => return Ok(error),
            },
            None => match self.all_states(now).await {
                Ok(states) => Brief::across(&states, &agent, now),
                Err(error) => return Ok(error),
            },
        };
        let value = serde_json::to_value(&brief).unwrap_or(Value::Null);
        let mut result = CallToolResult::structured(value);
        result.content = vec![ContentBlock::text(brief.to_markdown())];
        Ok(result)
    }

    #[tool(
        description = "The next legal step for an agent: continue, wait, ask, replan, repair or terminal; each reason with its fix."
    )]
    async fn next(
        &self,
        Parameters(input): Parameters<NextInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let agent = match self.agent(&ctx, input.agent) {
            Ok(agent) => agent,
            Err(error) => return Ok(error),
        };
        let read = self.load(&input.goal).await.map(|state| {
            let decision = decide(&state, &agent, self.clock.now());
            views::next(&input.goal, &state, &decision)
        });
        Ok(answered(read))
    }

    #[tool(description = "The agent's ready work across goals, most urgent first.")]
    async fn ready(
        &self,
        Parameters(input): Parameters<ReadyInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let agent = match self.agent(&ctx, input.agent) {
            Ok(agent) => agent,
            Err(error) => return Ok(error),
        };
        let read = self
            .store
            .frontier(&agent, self.clock.now())
            .await
            .map(|frontier| views::ready(&agent, &frontier))
            .map_err(|error| store_failure(&error));
        Ok(answered(read))
    }

    #[tool(
        description = "The board: todos by column, open gates, budget, criteria, evidence freshness."
    )]
    async fn status(&self, Parameters(input): Parameters<StatusInput>) -> Answer {
        let read = self
            .load(&input.goal)
            .await
            .map(|state| views::status(&state, self.clock.now()));
        Ok(answered(read))
    }

    #[tool(description = "Acquire the lease on a todo; answers its epoch.")]
    async fn claim(
        &self,
        Parameters(input): Parameters<ClaimInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let command = Command::Claim {
            todo: input.todo.clone(),
            ttl: input.ttl,
            workspace: input.workspace,
            grant_reason: input.grant_reason,
        };
        let todo = input.todo;
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::lease_written(done, &todo)
        })
        .await
    }

    #[tool(description = "Begin a turn under a held lease, reserving its budget.")]
    async fn begin(
        &self,
        Parameters(input): Parameters<BeginInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let command = Command::BeginTurn {
            todo: input.todo.clone(),
            epoch: input.epoch,
            turn: input.turn,
            reserve: input.reserve,
        };
        let todo = input.todo;
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::lease_written(done, &todo)
        })
        .await
    }

    #[tool(description = "Extend a held lease.")]
    async fn renew(
        &self,
        Parameters(input): Parameters<RenewInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let command = Command::Renew {
            todo: input.todo.clone(),
            epoch: input.epoch,
            ttl: input.ttl,
        };
        let todo = input.todo;
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::lease_written(done, &todo)
        })
        .await
    }

    #[tool(description = "Give a lease up; a begun turn's reservation returns uncharged.")]
    async fn release(
        &self,
        Parameters(input): Parameters<ReleaseInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let command = Command::Release {
            todo: input.todo.clone(),
            epoch: input.epoch,
        };
        let todo = input.todo;
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::lease_written(done, &todo)
        })
        .await
    }

    #[tool(
        description = "Settle a turn in one commit: verdict, evidence, transition, charge, lease release."
    )]
    async fn settle(
        &self,
        Parameters(input): Parameters<SettleInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let todo = input.settlement.todo.clone();
        let command = Command::SettleTurn(input.settlement);
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::settled(done, &todo)
        })
        .await
    }

    #[tool(description = "Move a held lease to another agent with a note, under a new epoch.")]
    async fn handoff(
        &self,
        Parameters(input): Parameters<HandoffInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let command = Command::Handoff {
            todo: input.todo.clone(),
            epoch: input.epoch,
            to: input.to,
            note: input.note,
            grant_reason: input.grant_reason,
        };
        let todo = input.todo;
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::lease_written(done, &todo)
        })
        .await
    }

    #[tool(description = "Record a blocking fact on a todo.")]
    async fn block(
        &self,
        Parameters(input): Parameters<BlockInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let command = Command::Block {
            todo: input.todo.clone(),
            reason: input.reason,
            grant_reason: input.grant_reason,
        };
        let todo = input.todo;
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::todo_written(done, &todo)
        })
        .await
    }

    #[tool(description = "Set a todo aside until a recorded condition holds.")]
    async fn defer(
        &self,
        Parameters(input): Parameters<DeferInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let command = Command::Defer {
            todo: input.todo.clone(),
            until: input.until,
            grant_reason: input.grant_reason,
        };
        let todo = input.todo;
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::todo_written(done, &todo)
        })
        .await
    }

    #[tool(
        description = "Resolve a turn whose expired lease left its outcome unknown, after reading back. Committed: a settlement, its verdict signed as for settle."
    )]
    async fn resolve_outcome(
        &self,
        Parameters(input): Parameters<ResolveOutcomeInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let command = Command::ResolveOutcome {
            todo: input.todo.clone(),
            turn: input.turn,
            resolution: input.resolution,
            grant_reason: input.grant_reason,
        };
        let todo = input.todo;
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::lease_written(done, &todo)
        })
        .await
    }

    #[tool(
        description = "Discharge a replan or repair obligation with the plan changes that answer it."
    )]
    async fn discharge(
        &self,
        Parameters(input): Parameters<DischargeInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let command = Command::Discharge {
            obligation: input.obligation.clone(),
            changes: input.changes,
        };
        let obligation = input.obligation;
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::obligation_written(done, &obligation)
        })
        .await
    }

    #[tool(description = "Ask a person: open a gate on todos, decisions or the whole goal.")]
    async fn gate_open(
        &self,
        Parameters(input): Parameters<GateOpenInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let gate = input.gate.id.clone();
        let command = Command::OpenGate { gate: input.gate };
        self.write(&ctx, &input.goal, &command, |done, now| {
            views::gate_written(done, &gate, now)
        })
        .await
    }

    #[tool(description = "Record evidence (validators, providers and the goal owner).")]
    async fn evidence_add(
        &self,
        Parameters(input): Parameters<EvidenceAddInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let id = input.evidence.id.clone();
        let command = Command::RecordEvidence {
            evidence: input.evidence,
        };
        self.write(&ctx, &input.goal, &command, |done, now| {
            views::evidence_written(done, &id, now)
        })
        .await
    }

    #[tool(description = "Record an observation of the outside world.")]
    async fn observe(
        &self,
        Parameters(input): Parameters<ObserveInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Answer {
        let command = Command::RecordObservation {
            observation: input.observation.clone(),
        };
        let observation = input.observation;
        self.write(&ctx, &input.goal, &command, |done, _| {
            views::observed(done, &observation)
        })
        .await
    }
}

impl LoopxMcp {
    /// Every goal of the store, as loaded now.
    async fn all_states(&self, now: Timestamp) -> Result<Vec<GoalState>, CallToolResult> {
        let summaries = self
            .store
            .goals(now)
            .await
            .map_err(|error| store_failure(&error))?;
        let mut states = Vec::with_capacity(summaries.len());
        for summary in summaries {
            states.push(self.load(&summary.goal).await?);
        }
        Ok(states)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for LoopxMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("loopx", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "loopx keeps long-running work in durable state. Start with `brief`, then `next`; act on its decision with the tool it names.",
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        resources::list(&*self.store, self.clock.now()).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        resources::read(&*self.store, &request.uri, self.clock.now())
            .await
            .map(Into::into)
    }
}
