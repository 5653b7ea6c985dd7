//! L2–L4 framing (todo)
