//! The on-disk layout, for tools: every reserved key and prefix, and the codecs of the
//! records strata writes that have no type of their own in the API (docs/format.md is the
//! specification; this module is its code).
//!
//! Applications do not need this module: collections, the policy, sealing and the
//! operations read and write these records themselves. Tools do — `strata repair` and
//! `strata inspect` (in `strata-cli`), fixtures, tests of the format — and take every key
//! and record format from here rather than spelling bytes themselves.
//!
//! * [`keys`] — the key-space map: every reserved prefix and key function;
//! * [`header`] — the 8-byte `NXDB` schema header at `__nx/schema/<table>`;
//! * [`envelope`] — a document's value: `NXDV | format | payload version | lock version | JSON`;
//! * [`catalog`] — the collection catalog records (`NXCL`) and collection names;
//! * [`retired`] — retirement records (`NXRV`);
//! * [`window`] — deploy-window (`NXWN`) and build (`NXBV`) records;
//! * [`read_catalog`] — every collection recorded in a store, as managed tables;
//! * [`FormatError`] — why the bytes of a fixed-layout record (header, envelope,
//!   checkpoint) do not decode.

/// The key-space map: every reserved prefix and the key-layout functions.
pub mod keys {
    pub use crate::keys::*;
}

/// The 8-byte schema header (`NXDB | format | flags | version`) of a managed table.
pub mod header {
    pub use crate::header::{checkpoint_key, header_key, SchemaHeader, HEADER_LEN, HEADER_MAGIC};
}

/// The document envelope.
pub mod envelope {
    pub use crate::payload::envelope::*;
}

/// The collection catalog: `__nx/catalog/<collection>` records, the id sequence, names.
pub mod catalog {
    pub use crate::collection::layout::{
        check_name, check_seq, decode_catalog_entry, decode_catalog_record, decode_retired,
        decode_seq, encode_catalog_record, retired_below, table_def, window_operational,
        CATALOG_FORMAT, CATALOG_MAGIC, CATALOG_RECORD_LEN, COLLECTION_TABLE_VERSION,
        FIRST_COLLECTION_ID, MAX_NAME_LEN,
    };
}

/// Retirement records: the payload version below which a collection's rows are retired.
pub mod retired {
    pub use crate::payload::retired::*;
}

/// Deploy-window records: the operational version of a collection in a window, and the
/// payload version each live client's build knows.
pub mod window {
    pub use crate::payload::window::*;
}

pub use crate::database::read_catalog;
pub use crate::format::{FixedRecord, FormatError};
