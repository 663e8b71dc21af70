//! Integration documents as the stores keep them: LZ4-compressed.
//!
//! A large API's stored document is tens of MB of JSON (Microsoft Graph
//! beta: 37 MB). Reading it back through SQLite's overflow pages cost more
//! than parsing it; compressed it is a tenth of that (JSON repeats its
//! keys), and decompressing is faster than reading the difference. So a
//! document is written as a BLOB (LZ4 block, its size prepended as a
//! little-endian u32, the layout of Python's `lz4.block`) and read back as
//! text. A TEXT value is read as it is: the records of earlier releases,
//! and a record an operator edited by hand.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};

/// Largest document a stored size may announce: a damaged prefix must not
/// make the reader allocate gigabytes.
const MAX_DOCUMENT_BYTES: usize = 1 << 30;

/// `document`, compressed for its column.
pub(crate) fn pack(document: &str) -> Vec<u8> {
    lz4_flex::compress_prepend_size(document.as_bytes())
}

/// A document column read back: packed or plain.
pub(crate) struct Document(pub(crate) String);

impl FromSql for Document {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value {
            ValueRef::Text(text) => std::str::from_utf8(text)
                .map(|text| Document(text.to_string()))
                .map_err(|e| FromSqlError::Other(Box::new(e))),
            ValueRef::Blob(packed) => unpack(packed).map(Document),
            _ => Err(FromSqlError::InvalidType),
        }
    }
}

fn unpack(packed: &[u8]) -> FromSqlResult<String> {
    unpack_bytes(packed).map_err(|e| FromSqlError::Other(e.into()))
}

/// A packed document back to text, for any store's bytes column.
pub(crate) fn unpack_bytes(packed: &[u8]) -> Result<String, String> {
    let announced = packed
        .get(..4)
        .and_then(|size| <[u8; 4]>::try_from(size).ok())
        .map_or(usize::MAX, |size| u32::from_le_bytes(size) as usize);
    if announced > MAX_DOCUMENT_BYTES {
        return Err("a stored document's size is damaged".into());
    }
    let bytes = lz4_flex::decompress_size_prepended(packed).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: ValueRef<'_>) -> FromSqlResult<String> {
        Document::column_result(value).map(|d| d.0)
    }

    #[test]
    fn a_document_reads_back_as_written_and_plain_text_as_it_is() {
        let document = r#"{"format":2,"tools":[{"name":"a"},{"name":"a"},{"name":"a"}]}"#;
        let packed = pack(document);
        assert!(packed.len() < document.len() + 4);
        assert_eq!(read(ValueRef::Blob(&packed)).unwrap(), document);
        assert_eq!(read(ValueRef::Text(document.as_bytes())).unwrap(), document);
    }

    #[test]
    fn a_damaged_document_is_an_error_not_a_panic() {
        let packed = pack("{\"format\":2}");
        assert!(read(ValueRef::Blob(&packed[..packed.len() - 2])).is_err());
        assert!(read(ValueRef::Blob(&[0xff, 0xff, 0xff, 0x7f, 1, 2])).is_err());
        assert!(read(ValueRef::Blob(b"")).is_err());
        assert!(read(ValueRef::Integer(3)).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_back_or_fail(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = read(ValueRef::Blob(&bytes));
        }
    }
}
