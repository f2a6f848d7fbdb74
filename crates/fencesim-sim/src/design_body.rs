//! A design's message inside the harness's transport, with its type erased: the transport,
//! faults and mailboxes are one, whatever the design, and only the design's own nodes and
//! client protocol look inside.

use std::any::Any;
use std::fmt;

use fencesim_design::{DesignMessage, MessageKind};

/// What the erased message keeps of its design's type.
trait Payload: Any + fmt::Debug + Send + Sync {
    fn kind(&self) -> MessageKind;
    fn clone_box(&self) -> Box<dyn Payload>;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    fn as_any(&self) -> &dyn Any;
}

impl<M: DesignMessage> Payload for M {
    fn kind(&self) -> MessageKind {
        DesignMessage::kind(self)
    }

    fn clone_box(&self) -> Box<dyn Payload> {
        Box::new(self.clone())
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A message of some design, as the transport carries it.
pub struct DesignBody(Box<dyn Payload>);

impl DesignBody {
    /// Wrap `msg`.
    pub fn new<M: DesignMessage>(msg: M) -> Self {
        DesignBody(Box::new(msg))
    }

    /// The kind `hold` faults name it by.
    pub fn kind(&self) -> MessageKind {
        self.0.kind()
    }

    /// The message as design `M`'s, or `None` if it is another design's.
    pub fn downcast<M: DesignMessage>(self) -> Option<M> {
        self.0.into_any().downcast::<M>().ok().map(|m| *m)
    }

    /// A look at the message as design `M`'s, or `None` if it is another design's.
    pub fn downcast_ref<M: DesignMessage>(&self) -> Option<&M> {
        self.0.as_any().downcast_ref::<M>()
    }
}

impl Clone for DesignBody {
    fn clone(&self) -> Self {
        DesignBody(self.0.clone_box())
    }
}

impl fmt::Debug for DesignBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
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
}
