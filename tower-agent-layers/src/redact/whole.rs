//! The whole answer redacted: its text parts as one text, its reasoning part by part, and a
//! refusal sent apart from the text.

use std::borrow::Cow;

use serde_json::Value;
use smallvec::SmallVec;

use super::{Blocked, Redaction, detect::apply_cut};
use tower_agent_core::{
    message::{Content, Reasoning},
    model::ModelResponse,
};

/// The whole answer with its values replaced (see the [module docs](super#what-it-covers)).
pub(super) fn whole(
    redaction: &Redaction,
    mut resp: ModelResponse,
) -> Result<ModelResponse, Blocked> {
    let content = &mut resp.message.content;
    if text_parts(redaction, content)? {
        // A part whose text was all a value's end is gone (Anthropic refuses an empty
        // text block).
        content.retain(|c| c.as_text().is_none_or(|t| !t.is_empty()));
    }
    for c in content.iter_mut() {
        if let Content::Reasoning(r) = c {
            reasoning(redaction, r)?;
        }
    }
    if let Some(refusal) = &mut resp.meta.refusal
        && let Cow::Owned(new) = redaction.redact(refusal)?
    {
        *refusal = new;
    }
    Ok(resp)
}

/// The text parts redacted as one text, joined as [`Message::text`](tower_agent_core::message::Message::text)
/// joins them (and as a stream's text pieces are): a value across parts is replaced in the
/// part where it starts, the rest of it taken from the parts after. `true` if a part changed.
fn text_parts(redaction: &Redaction, content: &mut [Content]) -> Result<bool, Blocked> {
    let mut parts: SmallVec<[&mut String; 2]> = content
        .iter_mut()
        .filter_map(|c| match c {
            Content::Text { text } => Some(text),
            _ => None,
        })
        .collect();
    if let [one] = parts.as_mut_slice() {
        return Ok(match redaction.redact(one)? {
            Cow::Borrowed(_) => false,
            Cow::Owned(new) => {
                **one = new;
                true
            }
        });
    }
    if parts.is_empty() {
        return Ok(false);
    }
    let mut joined = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    let mut cuts: SmallVec<[usize; 4]> = SmallVec::new();
    for part in &parts {
        joined.push_str(part);
        cuts.push(joined.len());
    }
    cuts.pop();
    let new = match apply_cut(&redaction.detectors, &joined, &mut cuts) {
        Ok(Cow::Borrowed(_)) => return Ok(false),
        Ok(Cow::Owned(new)) => new,
        Err(detector) => return Err(Blocked { detector }),
    };
    let mut start = 0;
    for (i, part) in parts.iter_mut().enumerate() {
        let end = cuts.get(i).copied().unwrap_or(new.len());
        new[start..end].clone_into(part);
        start = end;
    }
    Ok(true)
}

/// A reasoning part redacted: its text, and the summary texts of its opaque item (an OpenAI
/// Responses `reasoning` item, which the API reads for its `encrypted_content`). Text that
/// changed loses its signature: the signature was over the text the model wrote, and
/// Anthropic refuses a `thinking` block that does not match it, so the part is kept in the
/// thread redacted but not sent back.
fn reasoning(redaction: &Redaction, r: &mut Reasoning) -> Result<(), Blocked> {
    if let Cow::Owned(new) = redaction.redact(&r.text)? {
        r.text = new;
        r.signature = None;
    }
    let Some(opaque) = r.opaque.as_deref_mut() else {
        return Ok(());
    };
    for key in ["summary", "content"] {
        let Some(Value::Array(parts)) = opaque.item.get_mut(key) else {
            continue;
        };
        for part in parts {
            if let Some(Value::String(text)) = part.get_mut("text")
                && let Cow::Owned(new) = redaction.redact(text)?
            {
                *text = new;
            }
        }
    }
    Ok(())
}
