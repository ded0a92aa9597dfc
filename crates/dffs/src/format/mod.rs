//! The on-flash format as pure byte layouts: what every structure looks like, never where it
//! is or when it is written (FORMAT.md is its specification).
//!
//! Owns framing and CRCs ([`codec`], [`node`]), the format parameters and addresses
//! ([`params`]), the value types records and nodes carry ([`attrs`], [`extents`]) and the
//! compressed data node ([`compress`]). It must never import a store, a device or an index:
//! these modules are testable without any flash, and an independent reader of DFFS images can
//! use them as they are.

pub mod attrs;
pub mod codec;
pub mod compress;
pub mod extents;
pub mod node;
pub mod params;
