//! Messenger deliveries: checkpointed so each posts exactly once, across
//! evictions too.

use crate::durable::{DeliveryCheckpoint, DeliveryStage, Write};
use crate::events::EngineEvent;
use crate::messenger::{
    split_text, DeliveryEvent, MessengerCallback, PostError, EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE,
    INTERRUPTED_MESSENGER_RESPONSE,
};

use super::Session;
use crate::transcript::{Message, Role};

impl Session {
    pub(super) fn accept_delivery(&mut self, delivery_id: String, text: String) {
        if self.durable.deliveries.contains_key(&delivery_id) {
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
            self.post_all(&delivery_id, &[ERROR_MESSENGER_RESPONSE.to_string()]);
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
    /// posted and `completed` after: a crash before the posts leaves them
    /// for the restarted process to post, and one after leaves nothing
    /// owed. Only a crash in the middle of the posts themselves (a real
    /// surface call in flight) can post one twice. A checkpoint the store
    /// refused still posts: the process is alive, and silence is the worse
    /// failure.
    fn post_once(&mut self, checkpoint: DeliveryCheckpoint, posts: Vec<String>) {
        let posting = DeliveryCheckpoint { stage: DeliveryStage::Posting, posts, ..checkpoint };
        self.checkpoint(posting.clone(), DeliveryStage::Posting);
        self.post_owed(posting);
    }

    fn post_owed(&mut self, checkpoint: DeliveryCheckpoint) {
        if !self.unrecorded.posted.contains(&checkpoint.id) {
            self.post_all(&checkpoint.id, &checkpoint.posts);
        }
        let delivery_id = checkpoint.id.clone();
        let completed = DeliveryCheckpoint { posts: Vec::new(), ..checkpoint };
        if self.checkpoint(completed, DeliveryStage::Completed) {
            self.unrecorded.posted.remove(&delivery_id);
        } else {
            self.unrecorded.posted.insert(delivery_id);
        }
    }

    /// Posts a reply in order. A post the surface refuses ends the reply;
    /// an answer cut short that way (or the empty-answer notice) is
    /// followed by the error reply, so the chat never ends on part of an
    /// answer. The interrupted apology or the error reply failing is left
    /// at that: there is nothing better to say.
    fn post_all(&mut self, delivery_id: &str, posts: &[String]) {
        for post in posts {
            let Err(PostError(error)) = self.ports.surface.post(delivery_id, post) else { continue };
            let delivery = delivery_id.to_string();
            self.observe(EngineEvent::DeliveryPostFailed { delivery_id: delivery, error });
            let last_word = [INTERRUPTED_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE].contains(&post.as_str());
            if !last_word {
                self.post_all(delivery_id, &[ERROR_MESSENGER_RESPONSE.to_string()]);
            }
            return;
        }
    }

    fn checkpoint(&mut self, checkpoint: DeliveryCheckpoint, stage: DeliveryStage) -> bool {
        self.commit(vec![Write::PutDelivery(DeliveryCheckpoint { stage, ..checkpoint })])
    }

    /// After a restart: a delivery that never showed text is answered again;
    /// one that was mid-stream gets the apology; one whose reply was decided
    /// gets it posted; a completed one, nothing.
    pub(super) fn recover_deliveries(&mut self) {
        let open: Vec<DeliveryCheckpoint> = self
            .durable
            .deliveries
            .values()
            .filter(|checkpoint| checkpoint.stage != DeliveryStage::Completed)
            .cloned()
            .collect();
        for checkpoint in open {
            match checkpoint.stage {
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
        self.enqueue_reply(request_id, Default::default(), Some(callback), Some(checkpoint.id));
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
        let asked = messages.iter().rposition(|message| message.role == Role::User && message.text() == user_text);
        let replies = asked.map_or(&messages[..0], |asked| &messages[asked + 1..]);
        replies.iter().take_while(|message| message.role == Role::Assistant)
    }

    /// A delivery that never showed text is answered again after a restart:
    /// still `accepted`, and no reply that stays holds text (text stored
    /// while its `streaming` checkpoint was refused means it was mid-stream).
    fn answers_again(&self, checkpoint: &DeliveryCheckpoint) -> bool {
        checkpoint.stage == DeliveryStage::Accepted && !self.kept_reply_shows_text(&checkpoint.user_text)
    }

    /// A delivery will be answered again by its own turn.
    pub(super) fn delivery_will_answer(&self, delivery_id: Option<&str>) -> bool {
        let again = |checkpoint: &DeliveryCheckpoint| self.answers_again(checkpoint);
        match delivery_id {
            Some(id) => self.durable.deliveries.get(id).is_some_and(again),
            None => self.durable.deliveries.values().any(again),
        }
    }
}
