//! Group commit, as databases have long done it: concurrent appends through one store handle
//! queue, and one of them — the leader — writes every queued commit in one transaction with
//! one sync, then answers each with its own outcome.
//!
//! There is no timer and no batch size to wait for. An append that finds no leader leads at
//! once, so a commit with nothing beside it costs what it did alone; the leader takes what is
//! queued when it has the connection, and appends that arrive while it writes queue for the
//! next group. When its group is answered, the leader hands leadership to the oldest queued
//! append (which leads the next group, its own commit first) and returns, so no caller leads
//! for longer than one group.
//!
//! Leadership is a value ([`Leadership`]): dropped without leading (a panic, a caller that
//! stopped waiting, a blocking task that never ran), it still hands over to the next queued
//! append, so a queue is never left without a leader. A queued append whose leader vanished
//! before answering it learns so ([`Waited::Lost`]), and reads the outcome back like any
//! other commit whose answer was lost.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

/// A queue of jobs (commits) and whether a leader is writing.
pub(crate) struct Group<J, R> {
    inner: Mutex<Queue<J, R>>,
}

impl<J, R> std::fmt::Debug for Group<J, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("stats", &self.stats())
            .finish()
    }
}

struct Queue<J, R> {
    waiting: VecDeque<Slot<J, R>>,
    leading: bool,
    /// Groups written, and the commits in them, since the handle opened.
    groups: u64,
    grouped: u64,
}

struct Slot<J, R> {
    job: J,
    reply: oneshot::Sender<Signal<J, R>>,
}

/// What a queued append is told.
enum Signal<J, R> {
    /// Its job was written in a group: its own outcome.
    Done(R),
    /// It leads the next group, its own job first.
    Lead(Leadership<J, R>),
}

/// How joining a group turned out.
pub(crate) enum Joined<J, R> {
    /// No leader was writing: the caller leads, with its job.
    Lead(Leadership<J, R>),
    /// A leader is writing: the job is queued; wait for its answer.
    Queued(Waiting<J, R>),
}

/// A queued job's answer, to come.
pub(crate) struct Waiting<J, R> {
    reply: oneshot::Receiver<Signal<J, R>>,
}

/// What waiting for a queued job gave.
pub(crate) enum Waited<J, R> {
    /// Its outcome, from the group it was written in.
    Done(R),
    /// The caller leads the next group, its own job first.
    Lead(Leadership<J, R>),
    /// Its leader vanished before it answered (it panicked mid-group): the job may or may not
    /// have been written.
    Lost,
}

/// The right, and the duty, to write the next group: [`run`](Leadership::run) it, or drop it
/// and the next queued job's caller leads instead.
pub(crate) struct Leadership<J, R> {
    group: Arc<Group<J, R>>,
    own: Option<J>,
    /// Whether dropping it hands leadership on (not for one whose caller is gone already).
    armed: bool,
}

/// How many groups a store handle wrote, how many commits they held, and how many commits wait
/// for the next group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupStats {
    /// Groups (transactions) written since the handle opened, whatever their outcome.
    pub groups: u64,
    /// Commits in them (a group holds one or more; refused and replayed ones count too).
    pub commits: u64,
    /// Commits queued now, waiting for the group being written to finish.
    pub queued: usize,
}

impl<J, R> Group<J, R> {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Group {
            inner: Mutex::new(Queue {
                waiting: VecDeque::new(),
                leading: false,
                groups: 0,
                grouped: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Queue<J, R>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many groups were written and how many commits they held.
    pub(crate) fn stats(&self) -> GroupStats {
        let queue = self.lock();
        GroupStats {
            groups: queue.groups,
            commits: queue.grouped,
            queued: queue.waiting.len(),
        }
    }

    /// Leads with `job` when no leader is writing, queues it otherwise.
    pub(crate) fn join(self: &Arc<Self>, job: J) -> Joined<J, R> {
        let mut queue = self.lock();
        if !queue.leading {
            queue.leading = true;
            drop(queue);
            return Joined::Lead(Leadership {
                group: Arc::clone(self),
                own: Some(job),
                armed: true,
            });
        }
        let (reply, answer) = oneshot::channel();
        queue.waiting.push_back(Slot { job, reply });
        Joined::Queued(Waiting { reply: answer })
    }

    /// Joins with `job` and waits until it leads a group (`Ok`, to write it) or another
    /// leader answered it (`Err` with its outcome); `lost` when its leader vanished mid-group.
    pub(crate) async fn lead(self: &Arc<Self>, job: J, lost: R) -> Result<Leadership<J, R>, R> {
        match self.join(job) {
            Joined::Lead(leadership) => Ok(leadership),
            Joined::Queued(waiting) => match waiting.answer().await {
                Waited::Done(outcome) => Err(outcome),
                Waited::Lead(leadership) => Ok(leadership),
                Waited::Lost => Err(lost),
            },
        }
    }

    /// Passes leadership to the oldest queued job whose caller still waits, or ends it when
    /// none is queued.
    fn hand_off(self: &Arc<Self>) {
        loop {
            let slot = {
                let mut queue = self.lock();
                let Some(slot) = queue.waiting.pop_front() else {
                    queue.leading = false;
                    return;
                };
                slot
            };
            let next = Leadership {
                group: Arc::clone(self),
                own: Some(slot.job),
                armed: true,
            };
            match slot.reply.send(Signal::Lead(next)) {
                Ok(()) => return,
                // Its caller stopped waiting: its commit is not written; try the next.
                Err(signal) => {
                    if let Signal::Lead(mut gone) = signal {
                        gone.armed = false;
                    }
                }
            }
        }
    }
}

impl<J, R> Waiting<J, R> {
    /// Waits for the job's answer (or for leadership).
    pub(crate) async fn answer(self) -> Waited<J, R> {
        match self.reply.await {
            Ok(Signal::Done(outcome)) => Waited::Done(outcome),
            Ok(Signal::Lead(leadership)) => Waited::Lead(leadership),
            Err(_) => Waited::Lost,
        }
    }
}

impl<J, R> Leadership<J, R> {
    /// Writes one group: the leader's own job first, then every job queued now, through
    /// `write` (which returns one outcome per job, in order); answers each queued job, hands
    /// leadership on and returns the leader's own outcome (`None` only when `write` returned
    /// fewer outcomes than jobs).
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(crate) fn run(mut self, write: impl FnOnce(Vec<J>) -> Vec<R>) -> Option<R> {
        let (jobs, replies) = self.take();
        answer(replies, write(jobs))
    }

    /// [`run`](Leadership::run) with a `write` that waits (on a server).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) async fn run_async<F: Future<Output = Vec<R>>>(
        mut self,
        write: impl FnOnce(Vec<J>) -> F,
    ) -> Option<R> {
        let (jobs, replies) = self.take();
        answer(replies, write(jobs).await)
    }

    /// The group to write: the leader's own job, then every job queued now, with the replies
    /// the queued ones wait on.
    fn take(&mut self) -> (Vec<J>, Vec<oneshot::Sender<Signal<J, R>>>) {
        let mut jobs: Vec<J> = self.own.take().into_iter().collect();
        let mut replies = Vec::new();
        let mut queue = self.group.lock();
        for slot in queue.waiting.drain(..) {
            jobs.push(slot.job);
            replies.push(slot.reply);
        }
        queue.groups += 1;
        queue.grouped += jobs.len() as u64;
        (jobs, replies)
    }
}

/// Answers each queued job of a group with its outcome (the first outcome is the leader's own,
/// returned).
fn answer<J, R>(replies: Vec<oneshot::Sender<Signal<J, R>>>, outcomes: Vec<R>) -> Option<R> {
    let mut outcomes = outcomes.into_iter();
    let own = outcomes.next();
    for (reply, outcome) in replies.into_iter().zip(outcomes) {
        // A caller that stopped waiting is told nothing: its commit stands or not as written.
        drop(reply.send(Signal::Done(outcome)));
    }
    own
}

impl<J, R> Drop for Leadership<J, R> {
    fn drop(&mut self) {
        if self.armed {
            self.group.hand_off();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(joined: Joined<u32, u32>) -> Leadership<u32, u32> {
        match joined {
            Joined::Lead(leadership) => leadership,
            Joined::Queued(_) => panic!("expected to lead"),
        }
    }

    fn queued(joined: Joined<u32, u32>) -> Waiting<u32, u32> {
        match joined {
            Joined::Queued(waiting) => waiting,
            Joined::Lead(_) => panic!("expected to queue"),
        }
    }

    /// The first caller leads; what queued before it writes joins its group, what queues while
    /// it writes forms the next group, led by the oldest of those; each gets its own outcome.
    #[tokio::test]
    async fn queued_jobs_join_the_next_group_and_get_their_own_outcomes() {
        let group: Arc<Group<u32, u32>> = Group::new();
        let first = lead(group.join(1));
        let (two, three) = (queued(group.join(2)), queued(group.join(3)));
        assert_eq!(group.stats().queued, 2);
        let mut later = Vec::new();
        let own = first.run(|jobs| {
            assert_eq!(
                jobs,
                [1, 2, 3],
                "the leader takes what is queued when it writes"
            );
            // Arriving while the group is written: they wait for the next one.
            later.push(queued(group.join(4)));
            later.push(queued(group.join(5)));
            jobs.iter().map(|j| j * 10).collect()
        });
        assert_eq!(own, Some(10));
        assert!(matches!(two.answer().await, Waited::Done(20)));
        assert!(matches!(three.answer().await, Waited::Done(30)));
        let mut later = later.into_iter();
        let (Some(four), Some(five)) = (later.next(), later.next()) else {
            panic!("two appends queued during the write");
        };
        let Waited::Lead(next) = four.answer().await else {
            panic!("the oldest append queued during the write leads next");
        };
        let own = next.run(|jobs| {
            assert_eq!(jobs, [4, 5]);
            jobs.iter().map(|j| j * 10).collect()
        });
        assert_eq!(own, Some(40));
        assert!(matches!(five.answer().await, Waited::Done(50)));
        assert_eq!(
            group.stats(),
            GroupStats {
                groups: 2,
                commits: 5,
                queued: 0
            }
        );
        // Nothing queued and no leader: the next caller leads at once.
        drop(lead(group.join(6)));
        assert_eq!(group.stats().queued, 0);
    }

    /// A leader dropped without writing (a panic, a caller gone) hands over to the next queued
    /// job; a queued job whose caller stopped waiting is skipped; a job whose leader vanished
    /// mid-group learns it was lost.
    #[tokio::test]
    async fn leadership_is_never_lost() {
        let group: Arc<Group<u32, u32>> = Group::new();
        let first = lead(group.join(1));
        let gone = queued(group.join(2));
        let three = queued(group.join(3));
        drop(gone);
        drop(first);
        let Waited::Lead(next) = three.answer().await else {
            panic!("the next live queued job leads");
        };
        let four = queued(group.join(4));
        // `write` answers too few: the leader's own is there, the queued one is lost.
        let own = next.run(|_| vec![30]);
        assert_eq!(own, Some(30));
        assert!(matches!(four.answer().await, Waited::Lost));
        drop(lead(group.join(5)));
    }
}
