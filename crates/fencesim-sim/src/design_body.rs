//! A design's message inside the harness's transport, with its type erased: the transport,
//! faults and mailboxes are one, whatever the design, and only the design's own nodes and
//! client protocol look inside.
//!
//! A message travels in a box of its own (`Option<M>`, `Some` while it travels). Its receiver
//! empties the box and keeps it ([`Boxes`]) for the next message it sends: a node answers a
//! request in the request's box, and a client sends its next request in the reply's, so a
//! steady exchange allocates nothing per message.

use std::any::Any;
use std::fmt;

use fencesim_design::{DesignMessage, MessageKind};

/// What the erased message keeps of its design's type.
trait Payload: Any + Send + Sync {
    fn kind(&self) -> MessageKind;
    fn clone_box(&self) -> Box<dyn Payload>;
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl<M: DesignMessage> Payload for Option<M> {
    fn kind(&self) -> MessageKind {
        DesignMessage::kind(self.as_ref().expect("a message in flight"))
    }

    fn clone_box(&self) -> Box<dyn Payload> {
        Box::new(self.clone())
    }

    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Some(msg) => msg.fmt(f),
            None => f.write_str("(delivered)"),
        }
    }
}

/// A message of some design, as the transport carries it.
pub struct DesignBody(Box<dyn Payload>);

impl DesignBody {
    /// Wrap `msg`.
    pub fn new<M: DesignMessage>(msg: M) -> Self {
        DesignBody(Box::new(Some(msg)))
    }

    /// The kind `hold` faults name it by.
    pub fn kind(&self) -> MessageKind {
        self.0.kind()
    }

    /// The message as design `M`'s, or `None` if it is another design's.
    pub fn downcast<M: DesignMessage>(self) -> Option<M> {
        let any: Box<dyn Any> = self.0;
        *any.downcast::<Option<M>>().ok()?
    }

    /// A look at the message as design `M`'s, or `None` if it is another design's.
    pub fn downcast_ref<M: DesignMessage>(&self) -> Option<&M> {
        let any: &dyn Any = &*self.0;
        any.downcast_ref::<Option<M>>()?.as_ref()
    }
}

impl Clone for DesignBody {
    fn clone(&self) -> Self {
        DesignBody(self.0.clone_box())
    }
}

impl fmt::Debug for DesignBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug(f)
    }
}

/// The emptied boxes of design `M`'s messages a node or client received, kept for the messages
/// it sends (a few: what is not reused is freed).
pub(crate) struct Boxes<M>(Vec<Box<Option<M>>>);

/// How many emptied boxes a [`Boxes`] keeps.
const KEPT_BOXES: usize = 4;

impl<M> Default for Boxes<M> {
    fn default() -> Self {
        Boxes(Vec::new())
    }
}

impl<M: DesignMessage> Boxes<M> {
    /// Wrap `msg`, in a kept box if there is one.
    pub fn wrap(&mut self, msg: M) -> DesignBody {
        match self.0.pop() {
            Some(mut boxed) => {
                *boxed = Some(msg);
                DesignBody(boxed)
            }
            None => DesignBody::new(msg),
        }
    }

    /// The message as design `M`'s, or `None` if it is another design's; its box is kept.
    pub fn open(&mut self, body: DesignBody) -> Option<M> {
        let any: Box<dyn Any> = body.0;
        let mut boxed = any.downcast::<Option<M>>().ok()?;
        let msg = boxed.take();
        if self.0.len() < KEPT_BOXES {
            self.0.push(boxed);
        }
        msg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Ping(u32);

    impl DesignMessage for Ping {
        fn kind(&self) -> MessageKind {
            MessageKind::Renew
        }
    }

    #[derive(Clone, Debug)]
    struct Other;

    impl DesignMessage for Other {
        fn kind(&self) -> MessageKind {
            MessageKind::Raft
        }
    }

    #[test]
    fn a_body_keeps_its_kind_and_comes_back_only_as_its_own_type() {
        let body = DesignBody::new(Ping(7));
        assert_eq!(body.kind(), MessageKind::Renew);
        assert_eq!(format!("{body:?}"), "Ping(7)");
        assert_eq!(body.downcast_ref::<Ping>(), Some(&Ping(7)));
        assert!(body.downcast_ref::<Other>().is_none());
        assert_eq!(body.clone().downcast::<Ping>(), Some(Ping(7)));
        assert!(body.downcast::<Other>().is_none());
    }

    #[test]
    fn boxes_are_kept_by_receivers_and_reused_for_the_next_message() {
        let mut boxes = Boxes::<Ping>::default();
        let body = boxes.wrap(Ping(1));
        assert_eq!(body.kind(), MessageKind::Renew);
        assert!(
            boxes.open(DesignBody::new(Other)).is_none(),
            "another design's"
        );
        assert_eq!(boxes.open(body), Some(Ping(1)));
        assert_eq!(boxes.0.len(), 1);
        let again = boxes.wrap(Ping(2));
        assert!(boxes.0.is_empty(), "the kept box carries the next message");
        assert_eq!(format!("{again:?}"), "Ping(2)");
        assert_eq!(again.clone().downcast::<Ping>(), Some(Ping(2)));
        for n in 0..10 {
            boxes.open(DesignBody::new(Ping(n)));
        }
        assert_eq!(boxes.0.len(), KEPT_BOXES);
    }
}
