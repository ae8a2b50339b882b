//! Public views of stored values: the type (TYPE), the encoding (OBJECT ENCODING),
//! borrowed contents ([`ValueRef`]) and mutable access to collections
//! ([`ValueMut`]). Every match over them is exhaustive: a new kind is a compile
//! error wherever it must be handled.

use crate::values::hash::HashValue;
use crate::values::list::ListValue;
use crate::values::set::SetValue;
use crate::values::stream::StreamValue;
use crate::values::zset::ZSetValue;

/// Longest string Redis 7.0 keeps `embstr`-encoded (`OBJ_ENCODING_EMBSTR_SIZE_LIMIT`).
pub const EMBSTR_BYTES_MAX: usize = 44;

/// Integers `0..SHARED_INTEGERS` are shared objects in Redis (OBJECT REFCOUNT says
/// `2147483647` for them); `OBJ_SHARED_INTEGERS`.
pub const SHARED_INTEGERS: i64 = 10_000;

/// Redis' `OBJ_SHARED_REFCOUNT` (`INT_MAX`).
pub const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// The Redis type of a value, as TYPE and SCAN TYPE name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// `string`
    String,
    /// `list`
    List,
    /// `set`
    Set,
    /// `zset`
    ZSet,
    /// `hash`
    Hash,
    /// `stream`
    Stream,
}

impl ValueType {
    /// The name TYPE replies with.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::List => "list",
            ValueType::Set => "set",
            ValueType::ZSet => "zset",
            ValueType::Hash => "hash",
            ValueType::Stream => "stream",
        }
    }
}

/// The encoding OBJECT ENCODING reports (what Redis would use, not Ruvio's layout:
/// 7.0's names, and 7.4's `listpackex` for a small hash with field expiry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// A canonical 64-bit decimal integer.
    Int,
    /// A string of at most [`EMBSTR_BYTES_MAX`] bytes never modified in place.
    Embstr,
    /// A longer string, or one modified by APPEND/SETRANGE.
    Raw,
    /// A small collection in one packed block.
    Listpack,
    /// A big list: a chain of packed nodes.
    Quicklist,
    /// A small hash whose fields may carry expiry times (Redis 7.4+).
    ListpackEx,
    /// A big hash.
    Hashtable,
    /// A big sorted set: an ordered structure with a member index.
    Skiplist,
    /// A small all-integer set: sorted integers.
    Intset,
    /// A stream.
    Stream,
}

impl Encoding {
    /// The name OBJECT ENCODING replies with.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Int => "int",
            Encoding::Embstr => "embstr",
            Encoding::Raw => "raw",
            Encoding::Listpack => "listpack",
            Encoding::Quicklist => "quicklist",
            Encoding::ListpackEx => "listpackex",
            Encoding::Hashtable => "hashtable",
            Encoding::Skiplist => "skiplist",
            Encoding::Intset => "intset",
            Encoding::Stream => "stream",
        }
    }
}

/// A borrowed string value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrRef<'a> {
    /// Stored as an integer; its bytes are its decimal form.
    Int(i64),
    /// Stored as bytes.
    Bytes(&'a [u8]),
}

impl<'a> StrRef<'a> {
    /// Length of the string form in bytes.
    pub fn len(&self) -> usize {
        match self {
            StrRef::Int(n) => itoa::Buffer::new().format(*n).len(),
            StrRef::Bytes(b) => b.len(),
        }
    }

    /// True for the empty string.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of the string form; integers are formatted into `buf`.
    pub fn bytes<'b>(&self, buf: &'b mut itoa::Buffer) -> &'b [u8]
    where
        'a: 'b,
    {
        match *self {
            StrRef::Int(n) => buf.format(n).as_bytes(),
            StrRef::Bytes(b) => b,
        }
    }

    /// Write it as a bulk string reply.
    pub fn reply(&self, reply: &mut ruvio_resp::Reply<'_>) {
        match *self {
            StrRef::Int(n) => reply.bulk_int(n),
            StrRef::Bytes(b) => reply.bulk(b),
        }
    }
}

/// A borrowed stored value.
#[derive(Clone, Copy, Debug)]
pub enum ValueRef<'a> {
    /// A string (including int-encoded ones).
    Str(StrRef<'a>),
    /// A list.
    List(&'a ListValue),
    /// A hash.
    Hash(&'a HashValue),
    /// A sorted set.
    ZSet(&'a ZSetValue),
    /// A set.
    Set(&'a SetValue),
    /// A stream.
    Stream(&'a StreamValue),
}

impl<'a> ValueRef<'a> {
    /// The Redis type.
    pub fn value_type(&self) -> ValueType {
        match self {
            ValueRef::Str(_) => ValueType::String,
            ValueRef::List(_) => ValueType::List,
            ValueRef::Hash(_) => ValueType::Hash,
            ValueRef::ZSet(_) => ValueType::ZSet,
            ValueRef::Set(_) => ValueType::Set,
            ValueRef::Stream(_) => ValueType::Stream,
        }
    }

    /// The string, or `None` for other types.
    pub fn as_str(&self) -> Option<StrRef<'a>> {
        match *self {
            ValueRef::Str(s) => Some(s),
            _ => None,
        }
    }

    /// True for a collection with no element left (never true for strings).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            ValueRef::Str(_) => false,
            ValueRef::List(l) => l.is_empty(),
            ValueRef::Hash(h) => h.is_empty(),
            ValueRef::ZSet(z) => z.is_empty(),
            ValueRef::Set(s) => s.is_empty(),
            // An empty stream stays (XDEL, XTRIM and MAXLEN 0 keep the key).
            ValueRef::Stream(_) => false,
        }
    }

    /// The list, or `None` for other types.
    pub fn as_list(&self) -> Option<&'a ListValue> {
        match *self {
            ValueRef::List(l) => Some(l),
            _ => None,
        }
    }

    /// The hash, or `None` for other types.
    pub fn as_hash(&self) -> Option<&'a HashValue> {
        match *self {
            ValueRef::Hash(h) => Some(h),
            _ => None,
        }
    }

    /// The sorted set, or `None` for other types.
    pub fn as_zset(&self) -> Option<&'a ZSetValue> {
        match *self {
            ValueRef::ZSet(z) => Some(z),
            _ => None,
        }
    }

    /// The set, or `None` for other types.
    pub fn as_set(&self) -> Option<&'a SetValue> {
        match *self {
            ValueRef::Set(s) => Some(s),
            _ => None,
        }
    }

    /// The stream, or `None` for other types.
    pub fn as_stream(&self) -> Option<&'a StreamValue> {
        match *self {
            ValueRef::Stream(s) => Some(s),
            _ => None,
        }
    }
}

/// A stored value opened for change in place. Strings change through the entry's
/// own methods (their layout moves between inline and heap), so they carry nothing.
#[derive(Debug)]
pub enum ValueMut<'a> {
    /// A string.
    Str,
    /// A list.
    List(&'a mut ListValue),
    /// A hash.
    Hash(&'a mut HashValue),
    /// A sorted set.
    ZSet(&'a mut ZSetValue),
    /// A set.
    Set(&'a mut SetValue),
    /// A stream.
    Stream(&'a mut StreamValue),
}

impl<'a> ValueMut<'a> {
    /// The list, or `None` for other types.
    pub fn into_list(self) -> Option<&'a mut ListValue> {
        match self {
            ValueMut::List(l) => Some(l),
            _ => None,
        }
    }

    /// The hash, or `None` for other types.
    pub fn into_hash(self) -> Option<&'a mut HashValue> {
        match self {
            ValueMut::Hash(h) => Some(h),
            _ => None,
        }
    }

    /// The sorted set, or `None` for other types.
    pub fn into_zset(self) -> Option<&'a mut ZSetValue> {
        match self {
            ValueMut::ZSet(z) => Some(z),
            _ => None,
        }
    }

    /// The set, or `None` for other types.
    pub fn into_set(self) -> Option<&'a mut SetValue> {
        match self {
            ValueMut::Set(s) => Some(s),
            _ => None,
        }
    }

    /// The stream, or `None` for other types.
    pub fn into_stream(self) -> Option<&'a mut StreamValue> {
        match self {
            ValueMut::Stream(s) => Some(s),
            _ => None,
        }
    }
}
