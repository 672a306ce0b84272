//! The pieces every page is made of: the layout, budget gauges, times and badges. Markup is
//! written with `maud`, which escapes every value it interpolates.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use loopx_kernel::{Ledger, Timestamp};
use maud::{DOCTYPE, Markup, html};

/// A rendered page as an HTTP response body.
pub(super) fn html(page: Markup) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page.into_string(),
    )
        .into_response()
}

/// Which part of the navigation is current.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Nav {
    Goals,
    Inbox,
}

/// The layout around `body`. `live` names what a change reloads: `all` for a page that shows
/// every goal, a goal id for a goal's page, nothing for a page that does not follow changes.
pub(super) fn layout(title: &str, nav: Nav, live: Option<&str>, body: &Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · loopx" }
                link rel="stylesheet" href="/board.css";
                script src="/board.js" defer {}
            }
            body {
                header.top {
                    span.brand { "loopx" }
                    nav {
                        a href="/" aria-current=[(nav == Nav::Goals).then_some("page")] { "Goals" }
                        a href="/inbox" aria-current=[(nav == Nav::Inbox).then_some("page")] { "Inbox" }
                    }
                }
                main id="content" data-live=[live] {
                    (body)
                }
            }
        }
    }
}

/// The page shown for a failure.
pub(super) fn failure(title: &str, message: &str) -> Markup {
    let body = html! {
        h1 { (title) }
        p.notice.refused { (message) }
        p { a href="/" { "Back to the goals" } }
    };
    layout(title, Nav::Goals, None, &body)
}

/// A time as the kernel writes it, in a `<time>` element.
pub(super) fn time(at: Timestamp) -> Markup {
    let text = at.to_string();
    html! { time datetime=(text) { (text) } }
}

/// A time if there is one, a dash otherwise.
pub(super) fn maybe_time(at: Option<Timestamp>) -> Markup {
    at.map_or_else(|| html! { "—" }, time)
}

/// A standing or state as a badge, styled by its name.
pub(super) fn badge(name: &str) -> Markup {
    html! { span class={ "badge " (name) } { (name) } }
}

/// The budget: one gauge per bounded dimension (spent and reserved against the limit), and
/// what was spent of each unbounded one in words.
pub(super) fn budget(ledger: &Ledger) -> Markup {
    let rows = [
        (
            "turns",
            ledger.limits.turns,
            ledger.spent.turns,
            ledger.reserved.turns,
        ),
        (
            "tokens",
            ledger.limits.tokens,
            ledger.spent.tokens,
            ledger.reserved.tokens,
        ),
        (
            "cost (micros)",
            ledger.limits.cost_micros,
            ledger.spent.cost_micros,
            ledger.reserved.cost_micros,
        ),
        (
            "wall (ms)",
            ledger.limits.wall_ms,
            ledger.spent.wall_ms,
            ledger.reserved.wall_ms,
        ),
    ];
    html! {
        ul.budget {
            @for (name, limit, spent, reserved) in rows {
                @if let Some(limit) = limit {
                    li {
                        span.dimension { (name) }
                        meter min="0" max=(limit) value=(spent.saturating_add(reserved).min(limit))
                            high=(limit.saturating_mul(8) / 10) optimum="0"
                            title={ (spent) " spent, " (reserved) " reserved of " (limit) } {
                            (spent) " of " (limit)
                        }
                        span.figure { (spent) " / " (limit) }
                    }
                } @else if spent > 0 {
                    li {
                        span.dimension { (name) }
                        span.figure { (spent) " (no limit)" }
                    }
                }
            }
        }
    }
}
