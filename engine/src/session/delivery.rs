//! Messenger deliveries: checkpointed so each posts exactly once, across
//! evictions too.

use std::collections::VecDeque;

use crate::durable::{DeliveryCheckpoint, DeliveryStage, Write};
use crate::events::EngineEvent;
use crate::messenger::{
    split_text, DeliveryEvent, MessengerCallback, PostError, EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE,
    INTERRUPTED_MESSENGER_RESPONSE,
};

use super::Session;
use crate::transcript::{Message, Role};

/// A reply on its way to the chat surface: one post at a time, the next
/// sent once the surface has answered the last.
pub(crate) struct Outgoing {
    /// Posts not yet answered; the first is in flight.
    posts: VecDeque<String>,
    /// The delivery's checkpoint (`None` when the store never held the
    /// delivery).
    checkpoint: Option<DeliveryCheckpoint>,
    /// The number of the post in flight.
    in_flight: u32,
}

impl Session {
    pub(super) fn accept_delivery(&mut self, delivery_id: String, text: String) {
        // Answered once by its id: stored, on its way, or answered by this
        // process though the store refused to keep it.
        let known = self.durable.deliveries.contains_key(&delivery_id)
            || self.outgoing.contains_key(&delivery_id)
            || self.unrecorded.posted.contains(&delivery_id);
        if known {
            return;
        }
        let checkpoint = DeliveryCheckpoint {
            id: delivery_id.clone(),
            user_text: text.clone(),
            stage: DeliveryStage::Accepted,
            posts: Vec::new(),
        };
        let callback = Box::new(MessengerCallback::new(&delivery_id, self.reports.clone()));
        if !self.store_and_enqueue(&text, Default::default(), Some(callback), vec![Write::PutDelivery(checkpoint)]) {
            // Nothing was stored, not even a checkpoint to post from: say so
            // now rather than leave the chat silent.
            self.post_unrecorded(&delivery_id, vec![ERROR_MESSENGER_RESPONSE.to_string()]);
            return;
        }
        if let Some(queued) = self.queue.back_mut() {
            queued.delivery_id = Some(delivery_id.clone());
            let request_id = queued.request_id.clone();
            self.observe(EngineEvent::DeliveryAccepted { delivery_id, request_id });
        }
    }

    pub(super) fn on_delivery_event(&mut self, delivery_id: &str, event: DeliveryEvent) {
        let Some(checkpoint) = self.durable.deliveries.get(delivery_id).cloned() else {
            return;
        };
        if matches!(checkpoint.stage, DeliveryStage::Posting | DeliveryStage::Completed) {
            return;
        }
        let posts = match event {
            DeliveryEvent::FirstText => {
                self.checkpoint(checkpoint, DeliveryStage::Streaming);
                return;
            }
            DeliveryEvent::Done { text } | DeliveryEvent::Returned { text } if text.trim().is_empty() => {
                vec![EMPTY_MESSENGER_RESPONSE.to_string()]
            }
            DeliveryEvent::Done { text } | DeliveryEvent::Returned { text } => {
                split_text(&text, self.config.messenger_post_limit_chars.get())
            }
            DeliveryEvent::Error => vec![ERROR_MESSENGER_RESPONSE.to_string()],
            DeliveryEvent::Interrupted => vec![INTERRUPTED_MESSENGER_RESPONSE.to_string()],
        };
        self.post_once(checkpoint, posts);
    }

    /// The reply is checkpointed (`posting`, with its text) before it is
    /// posted, again as each post is acknowledged (with what is left), and
    /// `completed` after the last: a crash leaves the restarted process the
    /// posts still owed, and only a post in flight at the crash (the
    /// surface showed it, the engine never heard) can be posted twice. A
    /// checkpoint the store refused still posts: the process is alive, and
    /// silence is the worse failure.
    fn post_once(&mut self, checkpoint: DeliveryCheckpoint, posts: Vec<String>) {
        let posting = DeliveryCheckpoint { stage: DeliveryStage::Posting, posts, ..checkpoint };
        self.checkpoint(posting.clone(), DeliveryStage::Posting);
        self.post_owed(posting);
    }

    fn post_owed(&mut self, checkpoint: DeliveryCheckpoint) {
        if self.outgoing.contains_key(&checkpoint.id) {
            // On its way from this process already.
            return;
        }
        let delivery_id = checkpoint.id.clone();
        if self.unrecorded.posted.contains(&delivery_id) {
            self.complete(checkpoint);
            return;
        }
        let posts = checkpoint.posts.iter().cloned().collect();
        self.send_next(delivery_id, Outgoing { posts, checkpoint: Some(checkpoint), in_flight: 0 });
    }

    /// Posts a reply the store holds nothing of (the delivery itself was
    /// refused): there is nothing to checkpoint.
    fn post_unrecorded(&mut self, delivery_id: &str, posts: Vec<String>) {
        if self.outgoing.contains_key(delivery_id) {
            return;
        }
        self.send_next(delivery_id.to_string(), Outgoing { posts: posts.into(), checkpoint: None, in_flight: 0 });
    }

    /// Sends the reply's next post, or completes the delivery when none is
    /// left.
    fn send_next(&mut self, delivery_id: String, mut outgoing: Outgoing) {
        let Some(text) = outgoing.posts.front() else {
            match outgoing.checkpoint {
                Some(checkpoint) => self.complete(checkpoint),
                // Nothing to record: this process remembers it answered.
                None => _ = self.unrecorded.posted.insert(delivery_id),
            }
            return;
        };
        outgoing.in_flight = self.ports.surface.post(&delivery_id, text, self.sink.clone());
        self.outgoing.insert(delivery_id, outgoing);
    }

    /// The surface answered a post. A post it refused ends the reply; an
    /// answer cut short that way (or the empty-answer notice) is followed
    /// by the error reply, so the chat never ends on part of an answer. The
    /// interrupted apology or the error reply failing is left at that:
    /// there is nothing better to say.
    pub(super) fn on_post_done(&mut self, post: u32, delivery_id: &str, outcome: Result<(), PostError>) {
        if self.outgoing.get(delivery_id).is_none_or(|outgoing| outgoing.in_flight != post) {
            return;
        }
        let Some(mut outgoing) = self.outgoing.remove(delivery_id) else { return };
        let posted = outgoing.posts.pop_front().unwrap_or_default();
        if let Err(PostError(error)) = outcome {
            let delivery = delivery_id.to_string();
            self.observe(EngineEvent::DeliveryPostFailed { delivery_id: delivery, error });
            let last_word = [INTERRUPTED_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE].contains(&posted.as_str());
            outgoing.posts =
                if last_word { VecDeque::new() } else { VecDeque::from([ERROR_MESSENGER_RESPONSE.into()]) };
        }
        if let (Some(checkpoint), false) = (&mut outgoing.checkpoint, outgoing.posts.is_empty()) {
            checkpoint.posts = outgoing.posts.iter().cloned().collect();
            let owed = checkpoint.clone();
            self.checkpoint(owed, DeliveryStage::Posting);
        }
        self.send_next(delivery_id.to_string(), outgoing);
    }

    /// Every post of the reply is answered: nothing is owed.
    fn complete(&mut self, checkpoint: DeliveryCheckpoint) {
        let delivery_id = checkpoint.id.clone();
        let completed = DeliveryCheckpoint { posts: Vec::new(), ..checkpoint };
        if self.checkpoint(completed, DeliveryStage::Completed) {
            self.unrecorded.posted.remove(&delivery_id);
        } else {
            self.unrecorded.posted.insert(delivery_id);
        }
    }

    fn checkpoint(&mut self, checkpoint: DeliveryCheckpoint, stage: DeliveryStage) -> bool {
        self.commit(vec![Write::PutDelivery(DeliveryCheckpoint { stage, ..checkpoint })])
    }

    /// After a restart (or when putting the store right after refused
    /// writes): a delivery that never showed text is answered again; one
    /// that was mid-stream gets the apology; one whose reply was decided
    /// gets it posted; a completed one, or one this process posted, nothing.
    pub(super) fn recover_deliveries(&mut self) {
        let open: Vec<DeliveryCheckpoint> = self
            .durable
            .deliveries
            .values()
            .filter(|checkpoint| checkpoint.stage != DeliveryStage::Completed)
            .cloned()
            .collect();
        for checkpoint in open {
            if self.outgoing.contains_key(&checkpoint.id) || self.unrecorded.posted.contains(&checkpoint.id) {
                // Posted (or posting) by this process, whatever the store
                // says: only its record is owed.
                self.post_owed(checkpoint);
                continue;
            }
            match checkpoint.stage {
                // Its turn's failure was told (a client was sent it): the
                // messenger is told the same, not answered after it.
                _ if self.failure_told_to_delivery(&checkpoint) => {
                    self.post_once(checkpoint, vec![ERROR_MESSENGER_RESPONSE.to_string()])
                }
                _ if self.answers_again(&checkpoint) => self.answer_again(checkpoint),
                // An `accepted` one not answered again was mid-stream too.
                DeliveryStage::Accepted | DeliveryStage::Streaming => {
                    self.post_once(checkpoint, vec![INTERRUPTED_MESSENGER_RESPONSE.to_string()])
                }
                DeliveryStage::Posting => self.post_owed(checkpoint),
                DeliveryStage::Completed => {}
            }
        }
    }

    fn answer_again(&mut self, checkpoint: DeliveryCheckpoint) {
        let (request_id, write) = self.next_id("r");
        let mut writes = vec![write];
        writes.extend(self.dead_partials(&checkpoint.user_text).into_iter().map(Write::RemoveMessage));
        self.commit(writes);
        let mut callback = Box::new(MessengerCallback::new(&checkpoint.id, self.reports.clone()));
        crate::ports::StreamCallback::on_start(callback.as_mut(), &request_id);
        self.observe(EngineEvent::DeliveryAccepted {
            delivery_id: checkpoint.id.clone(),
            request_id: request_id.clone(),
        });
        // The new reply goes after the delivery's message and the replies to
        // it that stay, not after later messages' replies.
        let answers = self.stored_replies(&checkpoint.user_text).last().map(|reply| reply.id.clone());
        let answers = answers.or_else(|| self.asked(&checkpoint.user_text).map(|asked| asked.id.clone()));
        self.enqueue_reply(request_id, Default::default(), Some(callback), Some(checkpoint.id), answers);
    }

    /// Text-only replies to the delivery's message that dead turns left: the
    /// new answer replaces them, so the transcript holds the one the
    /// messenger posts. (A reply holding tool calls stays: a client may have
    /// answered one, and an answer is never dropped.)
    fn dead_partials(&self, user_text: &str) -> Vec<String> {
        let replies = self.stored_replies(user_text);
        replies.filter(|message| message.tools().next().is_none()).map(|message| message.id.clone()).collect()
    }

    /// Whether a reply that stays (it holds tool calls) holds text too: the
    /// messenger's turn streamed text, whatever its checkpoint says.
    fn kept_reply_shows_text(&self, user_text: &str) -> bool {
        self.stored_replies(user_text).any(|message| message.tools().next().is_some() && !message.text().is_empty())
    }

    /// The assistant messages that answer the last user message with `user_text`.
    fn stored_replies<'a>(&'a self, user_text: &str) -> impl Iterator<Item = &'a Message> + 'a {
        let messages = &self.durable.messages;
        let asked = self.asked_at(user_text);
        let replies = asked.map_or(&messages[..0], |asked| &messages[asked + 1..]);
        replies.iter().take_while(|message| message.role == Role::Assistant)
    }

    /// The last user message with `user_text`: the delivery's.
    fn asked(&self, user_text: &str) -> Option<&Message> {
        self.asked_at(user_text).map(|at| &self.durable.messages[at])
    }

    fn asked_at(&self, user_text: &str) -> Option<usize> {
        self.durable.messages.iter().rposition(|message| message.role == Role::User && message.text() == user_text)
    }

    /// A delivery that never showed text is answered again after a restart:
    /// still `accepted`, and no reply that stays holds text (text stored
    /// while its `streaming` checkpoint was refused means it was mid-stream).
    fn answers_again(&self, checkpoint: &DeliveryCheckpoint) -> bool {
        checkpoint.stage == DeliveryStage::Accepted
            && !self.kept_reply_shows_text(&checkpoint.user_text)
            && !self.failure_told_to_delivery(checkpoint)
    }

    /// A delivery still open whose turn failed, and was told so, before
    /// anything was posted.
    fn failure_told_to_delivery(&self, checkpoint: &DeliveryCheckpoint) -> bool {
        checkpoint.stage == DeliveryStage::Accepted
            && self.asked(&checkpoint.user_text).is_some_and(|asked| self.failure_told_about(&asked.id, ""))
    }

    /// The delivery will be answered again by its own turn.
    pub(super) fn delivery_will_answer(&self, delivery_id: &str) -> bool {
        self.durable.deliveries.get(delivery_id).is_some_and(|checkpoint| self.answers_again(checkpoint))
    }

    /// The last message is a user message nothing will answer: not a
    /// delivery's that its own turn answers again. (Another delivery
    /// answered again does not answer it.)
    pub(super) fn user_message_waits(&self) -> bool {
        let Some(last) = self.durable.messages.last().filter(|last| last.role == Role::User) else {
            return false;
        };
        let text = last.text();
        let its_own = |checkpoint: &DeliveryCheckpoint| checkpoint.user_text == text && self.answers_again(checkpoint);
        !self.durable.deliveries.values().any(its_own)
    }
}
