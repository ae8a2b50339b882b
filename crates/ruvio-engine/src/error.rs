//! Every client-visible error of Ruvio's commands, as a small enum mapped in one
//! place to Redis 7.0's exact text (as Dragonfly's `OpStatus` is): the engine's
//! command families, the server's own commands (connection, CLIENT, CLUSTER,
//! CONFIG, COMMAND, DEBUG) and the dispatcher's checks (unknown command or
//! subcommand, arity, NOAUTH, MOVED, CROSSSLOT). One enum rather than an engine
//! enum and a server enum so that there is one mapping to Redis' text and one
//! writer, and statistics count a failure from the type whoever produced it.
//!
//! Handlers return `Err(CmdError::..)` from their parse and execute steps; the one
//! [`CmdError::write`] turns it into the `-ERR ...` line. Variants that quote the
//! client's bytes keep them raw, as Redis does (only CR and LF become spaces).

use ruvio_resp::{Args, Reply};
use std::borrow::Cow;

/// A command failure with a fixed Redis error text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmdError {
    /// The key holds a value of another type.
    WrongType,
    /// An argument (or the stored value) is not a 64-bit integer in Redis' syntax.
    NotInteger,
    /// An argument (or the stored value) is not a float (`strtold` syntax).
    NotFloat,
    /// Unknown or misplaced option.
    Syntax,
    /// INCR/INCRBY/DECR leaves the i64 range.
    IncrOverflow,
    /// DECRBY with `-9223372036854775808`.
    DecrOverflow,
    /// INCRBYFLOAT result is NaN or infinite.
    NanOrInfinity,
    /// A string would exceed `proto-max-bulk-len`.
    StringTooLong,
    /// SETRANGE with a negative offset.
    OffsetOutOfRange,
    /// RENAME of a missing key.
    NoSuchKey,
    /// A DB index outside `0..databases`.
    DbIndexOutOfRange,
    /// MOVE/COPY onto itself.
    SameObject,
    /// An expire time that is not positive or overflows; carries the command name
    /// (`set`, `getex`, `expire` ...) as Redis prints it.
    InvalidExpireTime(&'static str),
    /// EXPIRE with NX together with XX, GT or LT.
    ExpireNxWithOthers,
    /// EXPIRE with GT and LT.
    ExpireGtAndLt,
    /// SCAN cursor that is not an unsigned integer.
    InvalidCursor,
    /// SWAPDB first argument not an integer.
    InvalidFirstDbIndex,
    /// SWAPDB second argument not an integer.
    InvalidSecondDbIndex,
    /// SELECT argument not an integer.
    InvalidDbIndex,
    /// LCS on a key holding a non-string.
    LcsNotStrings,
    /// LCS with both LEN and IDX.
    LcsLenAndIdx,
    /// LCS table larger than `proto-max-bulk-len`.
    LcsTooBig,
    /// LCS table allocation failed.
    LcsAllocFailed,
    /// OBJECT FREQ without an LFU policy.
    LfuNotSelected,
    /// OBJECT IDLETIME under an LFU policy.
    LruNotSelected,
    /// Wrong argument count for the named command or subcommand (`get`,
    /// `config|get`): the table's arity, or a count the handler checks (MSET's
    /// pairs).
    WrongArity(&'static str),
    /// LSET past the end of the list.
    IndexOutOfRange,
    /// A count that must be `>= 0` (`getPositiveLongFromObjectOrReply`, LPOP count).
    NotPositive,
    /// A long outside `-LONG_MAX..=LONG_MAX` (`getRangeLongFromObjectOrReply` without
    /// a message: LREM count, LPOS RANK).
    OutsideLongRange,
    /// LPOS RANK 0.
    RankZero,
    /// LPOS COUNT below 0 (or not an integer).
    CountNegative,
    /// LPOS MAXLEN below 0 (or not an integer).
    MaxlenNegative,
    /// LMPOP/BLMPOP numkeys below 1 (or not an integer).
    NumkeysNotPositive,
    /// LMPOP/BLMPOP COUNT below 1 (or not an integer).
    CountNotPositive,
    /// A blocking timeout that is not a float.
    TimeoutNotFloat,
    /// A blocking timeout below 0.
    TimeoutNegative,
    /// CONFIG REWRITE when Ruvio was started without `--config`.
    NoConfigFile,
    /// A command that may grow memory, over `maxmemory` with nothing to evict.
    Oom,
    /// CLIENT PAUSE's timeout is not an integer.
    TimeoutNotInteger,
    /// CLIENT PAUSE with a mode other than WRITE or ALL.
    PauseMode,
    /// A blocking timeout whose deadline overflows.
    TimeoutOutOfRange,
    /// FILLSET with a token that is not the key's live fill lease.
    FillTokenStale,
    /// FILLGET LEASE outside 1..=LEASE_MS_MAX.
    FillLeaseRange,
    /// FILLGET WAIT outside 0..=LEASE_MS_MAX.
    FillWaitRange,
    /// HINCRBY on a field whose value is not an integer.
    HashValueNotInteger,
    /// HINCRBYFLOAT on a field whose value is not a float.
    HashValueNotFloat,
    /// HINCRBYFLOAT with an infinite increment.
    IncrementNanOrInfinity,
    /// HRANDFIELD WITHVALUES with a count beyond +-LONG_MAX/2.
    ValueOutOfRange,
    /// Hash field expiry commands: `FIELDS` not where it must be.
    FieldsMissing,
    /// Hash field expiry commands: `numfields` differs from the fields given.
    NumFieldsMismatch,
    /// HTTL, HPERSIST, HGETDEL, HGETEX: `numfields` not a positive integer.
    NumFieldsNotPositive,
    /// HEXPIRE family: `numfields` not a positive integer (its own wording).
    NumFieldsParameter,
    /// HSETEX: `numfields` not an integer in 1..=INT_MAX.
    InvalidNumberOfFields,
    /// A hash field expiry time below 0.
    ExpireTimeNegative,
    /// HSETEX: EX/PX/EXAT/PXAT without a value.
    MissingExpireTime,
    /// HSETEX: both FNX and FXX.
    FnxAndFxx,
    /// HSETEX: more than one of EX, PX, EXAT, PXAT, KEEPTTL.
    OneExpiration,
    /// A score range bound that is not a float (ZRANGEBYSCORE, ZCOUNT ...).
    MinMaxNotFloat,
    /// A lex range bound without `(`, `[`, `-` or `+`.
    MinMaxNotLex,
    /// ZADD with both XX and NX.
    ZaddXxAndNx,
    /// ZADD with GT, LT and/or NX together.
    ZaddGtLtNx,
    /// ZADD INCR with more than one pair.
    ZaddIncrPairs,
    /// ZADD INCR / ZINCRBY leaving NaN (`inf` plus `-inf`).
    ScoreNan,
    /// A WEIGHTS value that is not a float.
    WeightNotFloat,
    /// ZUNIONSTORE ... with numkeys below 1; carries the command name.
    AtLeastOneKey(&'static str),
    /// ZRANGE LIMIT without BYSCORE or BYLEX.
    LimitNeedsBy,
    /// ZRANGE BYLEX with WITHSCORES.
    WithscoresBylex,
    /// SINTERCARD: numkeys beyond the arguments.
    NumkeysExceedArgs,
    /// SINTERCARD, ZINTERCARD: a negative (or non-integer) LIMIT.
    LimitNegative,
    /// SETBIT, GETBIT, BITFIELD: a bit offset that is not an integer, is negative
    /// or reaches past `proto-max-bulk-len`.
    BitOffset,
    /// SETBIT with a value other than 0 or 1.
    BitValue,
    /// BITPOS with a bit other than 0 or 1.
    BitArgument,
    /// BITFIELD with a type other than `i1`..`i64`, `u1`..`u63`.
    BitfieldType,
    /// BITFIELD OVERFLOW with a type other than WRAP, SAT, FAIL.
    BitfieldOverflow,
    /// BITFIELD_RO with SET or INCRBY.
    BitfieldReadOnly,
    /// BITOP NOT with more than one source.
    BitopNotOneSource,
    /// BITOP DIFF, DIFF1 or ANDOR with one source; carries the operation's name in
    /// upper case, as Redis 8.2 prints it.
    BitopTwoSources(&'static str),
    /// GEO: a member to search from is not in the set.
    GeoMemberNotFound,
    /// GEO: a distance unit other than m, km, ft, mi.
    GeoUnit,
    /// GEO: a radius that is not a float.
    GeoRadiusNotFloat,
    /// GEO: a negative radius.
    GeoRadiusNegative,
    /// GEOSEARCH BYBOX: a width that is not a float.
    GeoWidthNotFloat,
    /// GEOSEARCH BYBOX: a height that is not a float.
    GeoHeightNotFloat,
    /// GEOSEARCH BYBOX: a negative width or height.
    GeoBoxNegative,
    /// GEO search COUNT below 1.
    GeoCountNotPositive,
    /// GEO search ANY without COUNT.
    GeoAnyNeedsCount,
    /// GEORADIUS STORE/STOREDIST with WITHDIST, WITHHASH or WITHCOORD.
    GeoStoreWithOptions,
    /// GEOSEARCHSTORE with WITHDIST, WITHHASH or WITHCOORD.
    GeoSearchStoreWithOptions,
    /// SORT: an element or weight is not a double (`strtod` syntax, in range).
    SortScoreNotDouble,
    /// SORT BY a pattern while cluster mode (per-shard mode) is on.
    SortByInCluster,
    /// SORT GET while cluster mode (per-shard mode) is on.
    SortGetInCluster,
    /// A string that is not a HyperLogLog where one is needed (PFADD, PFCOUNT ...).
    NotHll,
    /// A HyperLogLog whose registers do not decode (`INVALIDOBJ`).
    HllCorrupted,
    /// PFDEBUG of a missing key.
    PfdebugNoKey,
    /// PFDEBUG DECODE of a dense HyperLogLog.
    HllNotSparse,
    /// An error line that quotes the client's bytes, built by [`CmdError::quoted`]
    /// (without the leading `-`).
    Line(Vec<u8>),

    // ----- the dispatcher's checks -----
    /// A command that needs AUTH first.
    NoAuth,
    /// Per-shard mode: the key's slot lives on another shard (node).
    Moved {
        /// The key's hash slot.
        slot: u16,
        /// The owner's host.
        host: String,
        /// The owner's port.
        port: u16,
    },
    /// `cluster-enabled yes`: the slot is migrating and a key is not here any
    /// more: ask the target (`-ASK`, the next command after ASKING).
    Ask {
        /// The key's hash slot.
        slot: u16,
        /// The target's host.
        host: String,
        /// The target's port.
        port: u16,
    },
    /// `cluster-enabled yes`: several keys of a slot being imported, some not
    /// here yet.
    TryAgain,
    /// Keys of one command in different slots (or, in forward mode, on different
    /// shards for a command that cannot be split).
    CrossSlot,
    /// `cluster-enabled yes`: no node serves the key's slot.
    SlotNotServed,
    /// `cluster-enabled yes`: the cluster state is `fail`.
    ClusterDown,
    /// `cluster-allow-reads-when-down yes`: a write while the cluster is down.
    ClusterDownReadOnly,

    // ----- connection commands -----
    /// AUTH with a password while none is configured.
    AuthNotConfigured,
    /// AUTH or HELLO AUTH with a wrong user or password.
    WrongPass,
    /// HELLO with a protocol version other than 2 or 3.
    NoProto,
    /// HELLO's protocol version is not an integer.
    ProtoNotInteger,
    /// HELLO without AUTH from an unauthenticated client.
    HelloNoAuth,

    // ----- CLIENT -----
    /// CLIENT SETNAME / HELLO SETNAME with a space or special character.
    BadClientName,
    /// CLIENT SETINFO LIB-NAME with a space or special character.
    BadLibName,
    /// CLIENT SETINFO LIB-VER with a space or special character.
    BadLibVer,
    /// CLIENT LIST ID with an id that is not a positive integer.
    InvalidClientId,
    /// CLIENT KILL ID with an id that is not a positive integer.
    ClientIdNotPositive,
    /// CLIENT KILL ip:port matched no client.
    NoSuchClient,
    /// CLIENT UNBLOCK with more than one reason.
    UnblockArgs,
    /// CLIENT UNBLOCK with a reason other than TIMEOUT or ERROR.
    UnblockReason,

    // ----- CLUSTER -----
    /// A cluster command in forward mode (Ruvio is then a standalone server).
    ClusterDisabled,
    /// CLUSTER COUNTKEYSINSLOT with a slot outside 0..16384.
    InvalidSlot,
    /// A slot argument of CLUSTER SLOT-STATS (Redis' `getSlotOrReply`) that is not
    /// an integer in 0..16384.
    InvalidOrOutOfRangeSlot,
    /// CLUSTER SLOT-STATS SLOTSRANGE with its start above its end.
    SlotRangeReversed(u16, u16),
    /// CLUSTER SLOT-STATS ORDERBY with a metric it cannot sort by.
    SlotStatsMetric,
    /// CLUSTER SLOT-STATS ORDERBY LIMIT outside 1..=16384.
    SlotStatsLimit,
    /// CLUSTER SLOT-STATS ORDERBY with LIMIT, or ASC/DESC, given twice.
    SlotStatsRepeatedFilter,
    /// CLUSTER GETKEYSINSLOT with a bad slot or count.
    InvalidSlotOrCount,

    // ----- COMMAND GETKEYS -----
    /// The command to inspect does not exist.
    GetKeysUnknownCommand,
    /// The command to inspect has the wrong number of arguments.
    GetKeysWrongArity,
    /// The command's key positions depend on arguments that name no keys.
    GetKeysInvalidArgs,
    /// The command takes no keys.
    GetKeysNoKeys,

    // ----- server administration -----
    /// SHUTDOWN ABORT with no shutdown in progress.
    NoShutdownInProgress,
    /// DEBUG PROTOCOL attrib/push on a RESP2 connection.
    Resp2NotSupported,
    /// DEBUG PROTOCOL with an unknown type name.
    DebugProtocolType,

    // ----- fault containment -----
    /// The command (named) panicked before changing anything (see `fault`).
    InternalPanic(&'static str),

    // ----- durability -----
    /// The write-ahead log failed (the OS error's text): writes are refused.
    AofWriteFailed(String),

    // ----- DUMP / RESTORE -----
    /// RESTORE onto an existing key without REPLACE.
    BusyKey,
    /// RESTORE with a negative TTL.
    InvalidTtlValue,
    /// RESTORE IDLETIME below 0.
    InvalidIdletime,
    /// RESTORE FREQ outside 0..=255.
    InvalidFreq,
    /// A payload whose RDB version is too new or whose CRC does not match.
    DumpPayloadInvalid,
    /// A payload whose object does not decode.
    BadDataFormat,

    // ----- streams -----
    /// A stream command's error, its whole text (the stream family keeps its texts
    /// in `streams::errors`).
    Stream(&'static str),

    // ----- Redis 8.4's strings (MSETEX, DELEX, DIGEST) -----
    // DELEX's and the digest's texts are Redis 8.4's delexCommand and digest
    // check (src/t_string.c; the copy of redis/redis this was checked with holds
    // only older versions of that file, so the bytes come from the suites that
    // run against a real 8.4: fakeredis's DELEX tests (marked for Redis >= 8.4;
    // `Key should be of string type if conditions are specified` for every
    // condition, unknown ones included; `must be exactly 16 hexadecimal
    // characters` for a digest of another length, 16 non-hex characters only
    // failing to match), and clients asserting the whole `ERR ...` line).
    /// MSETEX numkeys that is not an integer in 1..=INT_MAX.
    MsetexNumkeys,
    /// MSETEX with fewer key/value arguments than numkeys pairs.
    MsetexPairs,
    /// DELEX with an option other than IFEQ/IFNE/IFDEQ/IFDNE.
    DelexCondition,
    /// DELEX with a condition (any, even an unknown one) on a key that is not a
    /// string.
    DelexNotString,
    /// IFDEQ/IFDNE with a digest that is not 16 characters long (Redis checks
    /// only the length).
    DigestFormat,

    // ----- transactions -----
    /// MULTI inside MULTI.
    MultiNested,
    /// WATCH inside MULTI.
    WatchInMulti,
    /// EXEC outside MULTI.
    ExecWithoutMulti,
    /// DISCARD outside MULTI.
    DiscardWithoutMulti,
    /// EXEC of a transaction that had a command refused while queueing.
    ExecAbort,
    /// A `no-multi` command inside MULTI.
    NotAllowedInMulti,

    // ----- scripting -----
    /// EVALSHA of a SHA1 not in the script cache.
    NoScript,
    /// EVAL with a negative number of keys.
    ScriptNegativeKeys,
    /// EVAL with more keys than arguments.
    ScriptTooManyKeys,
    /// SCRIPT FLUSH with an argument other than ASYNC or SYNC.
    ScriptFlushArgs,

    // ----- observability -----
    /// SLOWLOG GET's and COMMANDLOG GET's count below -1 (or not a number).
    LogCountRange,
    /// COMMANDLOG's log type is none of Valkey's three.
    CommandlogType,
}

impl CmdError {
    /// The error line Redis sends, without the leading `-` and the CRLF.
    pub fn message(&self) -> Cow<'_, str> {
        let text = match self {
            CmdError::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value"
            }
            CmdError::NotInteger => "ERR value is not an integer or out of range",
            CmdError::NotFloat => "ERR value is not a valid float",
            CmdError::Syntax => "ERR syntax error",
            CmdError::IncrOverflow => "ERR increment or decrement would overflow",
            CmdError::DecrOverflow => "ERR decrement would overflow",
            CmdError::NanOrInfinity => "ERR increment would produce NaN or Infinity",
            CmdError::StringTooLong => {
                "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
            }
            CmdError::OffsetOutOfRange => "ERR offset is out of range",
            CmdError::NoSuchKey => "ERR no such key",
            CmdError::DbIndexOutOfRange => "ERR DB index is out of range",
            CmdError::SameObject => "ERR source and destination objects are the same",
            CmdError::InvalidExpireTime(cmd) => invalid_expire_message(cmd),
            CmdError::AofWriteFailed(error) => {
                return format!("MISCONF Errors writing to the AOF file: {error}").into()
            }
            CmdError::Stream(text) => text,
            CmdError::MsetexNumkeys => "ERR invalid numkeys value",
            CmdError::MsetexPairs => "ERR wrong number of key-value pairs",
            CmdError::DelexCondition => {
                "ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE"
            }
            CmdError::DelexNotString => {
                "ERR Key should be of string type if conditions are specified"
            },
            CmdError::DigestFormat => "ERR must be exactly 16 hexadecimal characters",
            CmdError::InternalPanic(cmd) => {
                return format!(
                    "ERR internal error in '{cmd}' command: nothing was changed (see the server log)"
                )
                .into()
            }
            // Written raw by `write`; as text only for tests and logs.
            CmdError::Line(line) => return String::from_utf8_lossy(line),
            CmdError::ExpireNxWithOthers => {
                "ERR NX and XX, GT or LT options at the same time are not compatible"
            }
            CmdError::ExpireGtAndLt => "ERR GT and LT options at the same time are not compatible",
            CmdError::InvalidCursor => "ERR invalid cursor",
            CmdError::InvalidFirstDbIndex => "ERR invalid first DB index",
            CmdError::InvalidSecondDbIndex => "ERR invalid second DB index",
            CmdError::InvalidDbIndex => "ERR invalid DB index",
            CmdError::LcsNotStrings => "ERR The specified keys must contain string values",
            CmdError::LcsLenAndIdx => {
                "ERR If you want both the length and indexes, please just use IDX."
            }
            CmdError::LcsTooBig => {
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
            }
            CmdError::LcsAllocFailed => {
                "ERR Insufficient memory, failed allocating transient memory for LCS"
            }
            CmdError::LfuNotSelected => {
                "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
                 Please note that when switching between policies at runtime LRU and LFU data \
                 will take some time to adjust."
            }
            CmdError::LruNotSelected => {
                "ERR An LRU maxmemory policy is not selected, access time not tracked. \
                 Please note that when switching between policies at runtime LRU and LFU data \
                 will take some time to adjust."
            }
            CmdError::WrongArity(cmd) => {
                return format!("ERR wrong number of arguments for '{cmd}' command").into()
            }
            CmdError::IndexOutOfRange => "ERR index out of range",
            CmdError::NotPositive => "ERR value is out of range, must be positive",
            CmdError::OutsideLongRange => {
                "ERR value is out of range, value must between -9223372036854775807 and \
                 9223372036854775807"
            }
            CmdError::RankZero => {
                "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                 second ... or use negative to start from the end of the list"
            }
            CmdError::CountNegative => "ERR COUNT can't be negative",
            CmdError::MaxlenNegative => "ERR MAXLEN can't be negative",
            CmdError::NumkeysNotPositive => "ERR numkeys should be greater than 0",
            CmdError::CountNotPositive => "ERR count should be greater than 0",
            CmdError::TimeoutNotFloat => "ERR timeout is not a float or out of range",
            CmdError::TimeoutNegative => "ERR timeout is negative",
            CmdError::NoConfigFile => "ERR The server is running without a config file",
            CmdError::Oom => "OOM command not allowed when used memory > 'maxmemory'.",
            CmdError::TimeoutNotInteger => "ERR timeout is not an integer or out of range",
            CmdError::PauseMode => "ERR CLIENT PAUSE mode must be WRITE or ALL",
            CmdError::TimeoutOutOfRange => "ERR timeout is out of range",
            CmdError::FillTokenStale => {
                "ERR fill token is stale or unknown (the lease ended or was never granted)"
            }
            CmdError::FillLeaseRange => "ERR LEASE must be between 1 and 3600000 milliseconds",
            CmdError::FillWaitRange => "ERR WAIT must be between 0 and 3600000 milliseconds",
            CmdError::HashValueNotInteger => "ERR hash value is not an integer",
            CmdError::HashValueNotFloat => "ERR hash value is not a float",
            CmdError::IncrementNanOrInfinity => "ERR value is NaN or Infinity",
            CmdError::ValueOutOfRange => "ERR value is out of range",
            CmdError::FieldsMissing => {
                "ERR Mandatory argument FIELDS is missing or not at the right position"
            }
            CmdError::NumFieldsMismatch => {
                "ERR The `numfields` parameter must match the number of arguments"
            }
            CmdError::NumFieldsNotPositive => "ERR Number of fields must be a positive integer",
            CmdError::NumFieldsParameter => "ERR Parameter `numFields` should be greater than 0",
            CmdError::InvalidNumberOfFields => "ERR invalid number of fields",
            CmdError::ExpireTimeNegative => "ERR invalid expire time, must be >= 0",
            CmdError::MissingExpireTime => "ERR missing expire time",
            CmdError::FnxAndFxx => "ERR Only one of FXX or FNX arguments can be specified",
            CmdError::OneExpiration => {
                "ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified"
            }
            CmdError::MinMaxNotFloat => "ERR min or max is not a float",
            CmdError::MinMaxNotLex => "ERR min or max not valid string range item",
            CmdError::ZaddXxAndNx => "ERR XX and NX options at the same time are not compatible",
            CmdError::ZaddGtLtNx => {
                "ERR GT, LT, and/or NX options at the same time are not compatible"
            }
            CmdError::ZaddIncrPairs => "ERR INCR option supports a single increment-element pair",
            CmdError::ScoreNan => "ERR resulting score is not a number (NaN)",
            CmdError::WeightNotFloat => "ERR weight value is not a float",
            CmdError::AtLeastOneKey(cmd) => at_least_one_key_message(cmd),
            CmdError::LimitNeedsBy => {
                "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
            }
            CmdError::WithscoresBylex => {
                "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
            }
            CmdError::NumkeysExceedArgs => {
                "ERR Number of keys can't be greater than number of args"
            }
            CmdError::LimitNegative => "ERR LIMIT can't be negative",
            CmdError::BitOffset => "ERR bit offset is not an integer or out of range",
            CmdError::BitValue => "ERR bit is not an integer or out of range",
            CmdError::BitArgument => "ERR The bit argument must be 1 or 0.",
            CmdError::BitfieldType => {
                "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not \
                 supported but i64 is."
            }
            CmdError::BitfieldOverflow => "ERR Invalid OVERFLOW type specified",
            CmdError::BitfieldReadOnly => "ERR BITFIELD_RO only supports the GET subcommand",
            CmdError::BitopNotOneSource => "ERR BITOP NOT must be called with a single source key.",
            CmdError::BitopTwoSources(op) => {
                return format!("ERR BITOP {op} must be called with at least two source keys.")
                    .into()
            }
            CmdError::GeoMemberNotFound => "ERR could not decode requested zset member",
            CmdError::GeoUnit => "ERR unsupported unit provided. please use M, KM, FT, MI",
            CmdError::GeoRadiusNotFloat => "ERR need numeric radius",
            CmdError::GeoRadiusNegative => "ERR radius cannot be negative",
            CmdError::GeoWidthNotFloat => "ERR need numeric width",
            CmdError::GeoHeightNotFloat => "ERR need numeric height",
            CmdError::GeoBoxNegative => "ERR height or width cannot be negative",
            CmdError::GeoCountNotPositive => "ERR COUNT must be > 0",
            CmdError::GeoAnyNeedsCount => "ERR the ANY argument requires COUNT argument",
            CmdError::GeoStoreWithOptions => {
                "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and \
                 WITHCOORD options"
            }
            CmdError::GeoSearchStoreWithOptions => {
                "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD \
                 options"
            }
            CmdError::SortScoreNotDouble => "ERR One or more scores can't be converted into double",
            CmdError::SortByInCluster => "ERR BY option of SORT denied in Cluster mode.",
            CmdError::SortGetInCluster => "ERR GET option of SORT denied in Cluster mode.",
            CmdError::NotHll => "WRONGTYPE Key is not a valid HyperLogLog string value.",
            CmdError::HllCorrupted => "INVALIDOBJ Corrupted HLL object detected",
            CmdError::PfdebugNoKey => "ERR The specified key does not exist",
            CmdError::HllNotSparse => "ERR HLL encoding is not sparse",
            CmdError::NoAuth => "NOAUTH Authentication required.",
            CmdError::Moved { slot, host, port } => {
                return format!("MOVED {slot} {host}:{port}").into()
            }
            CmdError::Ask { slot, host, port } => return format!("ASK {slot} {host}:{port}").into(),
            CmdError::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot",
            CmdError::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot",
            CmdError::SlotNotServed => "CLUSTERDOWN Hash slot not served",
            CmdError::ClusterDown => "CLUSTERDOWN The cluster is down",
            CmdError::ClusterDownReadOnly => {
                "CLUSTERDOWN The cluster is down and only accepts read commands"
            }
            CmdError::AuthNotConfigured => {
                "ERR AUTH <password> called without any password configured for the default \
                 user. Are you sure your configuration is correct?"
            }
            CmdError::WrongPass => "WRONGPASS invalid username-password pair or user is disabled.",
            CmdError::NoProto => "NOPROTO unsupported protocol version",
            CmdError::ProtoNotInteger => "ERR Protocol version is not an integer or out of range",
            CmdError::HelloNoAuth => {
                "NOAUTH HELLO must be called with the client already authenticated, otherwise \
                 the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the \
                 client and select the RESP protocol version at the same time"
            }
            CmdError::BadClientName => {
                "ERR Client names cannot contain spaces, newlines or special characters."
            }
            CmdError::BadLibName => {
                "ERR lib-name cannot contain spaces, newlines or special characters."
            }
            CmdError::BadLibVer => {
                "ERR lib-ver cannot contain spaces, newlines or special characters."
            }
            CmdError::InvalidClientId => "ERR Invalid client ID",
            CmdError::ClientIdNotPositive => "ERR client-id should be greater than 0",
            CmdError::NoSuchClient => "ERR No such client",
            CmdError::UnblockArgs => {
                "ERR unknown subcommand or wrong number of arguments for 'unblock'. \
                 Try CLIENT HELP."
            }
            CmdError::UnblockReason => "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            CmdError::ClusterDisabled => "ERR This instance has cluster support disabled",
            CmdError::InvalidSlot => "ERR Invalid slot",
            CmdError::InvalidOrOutOfRangeSlot => "ERR Invalid or out of range slot",
            CmdError::SlotRangeReversed(start, end) => {
                return format!(
                    "ERR Start slot number {start} is greater than end slot number {end}"
                )
                .into()
            }
            CmdError::SlotStatsMetric => "ERR Unrecognized sort metric for ORDERBY.",
            CmdError::SlotStatsLimit => {
                "ERR Limit has to lie in between 1 and 16384 (maximum number of slots)."
            }
            CmdError::SlotStatsRepeatedFilter => {
                "ERR Multiple filters of the same type are disallowed."
            }
            CmdError::InvalidSlotOrCount => "ERR Invalid slot or number of keys",
            CmdError::GetKeysUnknownCommand => "ERR Invalid command specified",
            CmdError::GetKeysWrongArity => "ERR Invalid number of arguments specified for command",
            CmdError::GetKeysInvalidArgs => "ERR Invalid arguments specified for command",
            CmdError::GetKeysNoKeys => "ERR The command has no key arguments",
            CmdError::NoShutdownInProgress => "ERR No shutdown in progress.",
            CmdError::Resp2NotSupported => "ERR RESP2 is not supported by this command",
            CmdError::MultiNested => "ERR MULTI calls can not be nested",
            CmdError::WatchInMulti => "ERR WATCH inside MULTI is not allowed",
            CmdError::ExecWithoutMulti => "ERR EXEC without MULTI",
            CmdError::DiscardWithoutMulti => "ERR DISCARD without MULTI",
            CmdError::ExecAbort => "EXECABORT Transaction discarded because of previous errors.",
            CmdError::NotAllowedInMulti => "ERR Command not allowed inside a transaction",
            CmdError::DebugProtocolType => {
                "ERR Wrong protocol type name. Please use one of the following: \
                 string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"
            }
            CmdError::BusyKey => "BUSYKEY Target key name already exists.",
            CmdError::InvalidTtlValue => "ERR Invalid TTL value, must be >= 0",
            CmdError::InvalidIdletime => "ERR Invalid IDLETIME value, must be >= 0",
            CmdError::InvalidFreq => "ERR Invalid FREQ value, must be >= 0 and <= 255",
            CmdError::DumpPayloadInvalid => "ERR DUMP payload version or checksum are wrong",
            CmdError::BadDataFormat => "ERR Bad data format",
            CmdError::NoScript => "NOSCRIPT No matching script. Please use EVAL.",
            CmdError::ScriptNegativeKeys => "ERR Number of keys can't be negative",
            CmdError::ScriptTooManyKeys => "ERR Number of keys can't be greater than number of args",
            CmdError::ScriptFlushArgs => "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
            CmdError::LogCountRange => "ERR count should be greater than or equal to -1",
            CmdError::CommandlogType => {
                "ERR type should be one of the following: slow, large-request, large-reply"
            }
        };
        Cow::Borrowed(text)
    }

    /// Write the error reply.
    pub fn write(&self, reply: &mut Reply<'_>) {
        match self {
            // Its text may quote a client's bytes (an unknown node's name, an
            // option): kept to one line as Redis keeps its formatted errors.
            CmdError::Line(line) => reply.error_bytes(line),
            _ => reply.error(&self.message()),
        }
    }

    /// An error line that quotes client bytes (`prefix` + `quoted` + `suffix`) the way
    /// Redis' `addReplyErrorFormat` does: the bytes stay as they are, but CR and LF
    /// at the line's end are dropped (`sdstrim`) and the others become spaces.
    pub fn quoted(prefix: &str, quoted: &[u8], suffix: &str) -> CmdError {
        let mut line = Vec::with_capacity(prefix.len() + quoted.len() + suffix.len());
        line.extend_from_slice(prefix.as_bytes());
        line.extend_from_slice(quoted);
        line.extend_from_slice(suffix.as_bytes());
        while line.last().is_some_and(|&b| b == b'\r' || b == b'\n') {
            line.pop();
        }
        for b in &mut line {
            if *b == b'\r' || *b == b'\n' {
                *b = b' ';
            }
        }
        CmdError::Line(line)
    }

    /// `ERR Unsupported option <opt>` (EXPIRE family). Redis prints the option with
    /// `%s`, so it stops at the first NUL byte.
    pub fn unsupported_option(opt: &[u8]) -> CmdError {
        let opt = until_nul(opt);
        CmdError::quoted("ERR Unsupported option ", opt, "")
    }

    /// `ERR unknown subcommand '<sub>'. Try <CONTAINER> HELP.` (at most 128 bytes quoted).
    pub fn unknown_subcommand(sub: &[u8], container: &str) -> CmdError {
        let sub = until_nul(sub);
        let sub = &sub[..sub.len().min(QUOTED_BYTES_MAX)];
        let container = container.to_ascii_uppercase();
        CmdError::quoted(
            "ERR unknown subcommand '",
            sub,
            &format!("'. Try {container} HELP."),
        )
    }

    /// Redis' `addReplySubcommandSyntaxError`: a subcommand with arguments it does
    /// not take.
    pub fn subcommand_syntax(sub: &[u8], container: &str) -> CmdError {
        let sub = until_nul(sub);
        let sub = &sub[..sub.len().min(QUOTED_BYTES_MAX)];
        let container = container.to_ascii_uppercase();
        CmdError::quoted(
            "ERR unknown subcommand or wrong number of arguments for '",
            sub,
            &format!("'. Try {container} HELP."),
        )
    }

    /// Redis 7's `ERR unknown command '<name>', with args beginning with: '<arg>' ...`:
    /// the name and the arguments quoted up to [`QUOTED_BYTES_MAX`] bytes each way,
    /// each up to a NUL (printed with `%s`).
    pub fn unknown_command(args: Args<'_>) -> CmdError {
        let mut shown = Vec::new();
        for arg in args.iter().skip(1) {
            if shown.len() >= QUOTED_BYTES_MAX {
                break;
            }
            let room = QUOTED_BYTES_MAX - shown.len();
            let arg = until_nul(arg);
            shown.push(b'\'');
            shown.extend_from_slice(&arg[..arg.len().min(room)]);
            shown.extend_from_slice(b"' ");
        }
        let name = until_nul(args.get(0));
        let mut line = b"ERR unknown command '".to_vec();
        line.extend_from_slice(&name[..name.len().min(QUOTED_BYTES_MAX)]);
        line.extend_from_slice(b"', with args beginning with: ");
        line.extend_from_slice(&shown);
        CmdError::quoted("", &line, "")
    }

    /// `ERR Syntax error in HELLO option '<opt>'` (up to a NUL, `%s`).
    pub fn hello_option(opt: &[u8]) -> CmdError {
        CmdError::quoted("ERR Syntax error in HELLO option '", until_nul(opt), "'")
    }

    /// `ERR Unknown client type '<type>'` (CLIENT LIST / KILL TYPE; up to a NUL, `%s`).
    pub fn unknown_client_type(ty: &[u8]) -> CmdError {
        CmdError::quoted("ERR Unknown client type '", until_nul(ty), "'")
    }

    /// `ERR Unrecognized option '<attr>'` (CLIENT SETINFO).
    pub fn unrecognized_option(attr: &[u8]) -> CmdError {
        CmdError::quoted("ERR Unrecognized option '", attr, "'")
    }

    /// CONFIG SET of a parameter that does not exist (`name` lower-cased, as Redis
    /// prints it, up to a NUL).
    pub fn config_unknown(name: &[u8]) -> CmdError {
        CmdError::quoted(
            "ERR Unknown option or number of arguments for CONFIG SET - '",
            until_nul(name),
            "'",
        )
    }

    /// CONFIG SET of a parameter fixed at start-up.
    pub fn config_immutable(name: &[u8]) -> CmdError {
        CmdError::quoted(
            "ERR CONFIG SET failed (possibly related to argument '",
            name,
            "') - can't set immutable config",
        )
    }

    /// CONFIG REWRITE could not write the file (Redis: `Rewriting config file: <why>`).
    pub fn rewrite_failed(why: &str) -> CmdError {
        CmdError::quoted("ERR Rewriting config file: ", why.as_bytes(), "")
    }

    /// CONFIG SET of a value `name` cannot take, for `reason`.
    pub fn config_failed(name: &[u8], reason: &str) -> CmdError {
        CmdError::quoted(
            "ERR CONFIG SET failed (possibly related to argument '",
            name,
            &format!("') - {reason}"),
        )
    }

    /// CONFIG SET naming a parameter twice.
    pub fn config_duplicate(name: &[u8]) -> CmdError {
        CmdError::quoted(
            "ERR CONFIG SET failed (possibly related to argument '",
            name,
            "') - duplicate parameter",
        )
    }

    /// CONFIG SET with a value the parameter cannot take.
    pub fn config_bad_value(name: &[u8]) -> CmdError {
        CmdError::quoted(
            "ERR CONFIG SET failed (possibly related to argument '",
            name,
            "') - argument couldn't be parsed into an integer",
        )
    }
}

/// Most bytes of a client's argument an error line quotes (Redis' `%.128s`).
const QUOTED_BYTES_MAX: usize = 128;

/// `invalid expire time in '<cmd>' command` for the commands that can say it.
fn invalid_expire_message(cmd: &str) -> &'static str {
    match cmd {
        "set" => "ERR invalid expire time in 'set' command",
        "setex" => "ERR invalid expire time in 'setex' command",
        "psetex" => "ERR invalid expire time in 'psetex' command",
        "getex" => "ERR invalid expire time in 'getex' command",
        "expire" => "ERR invalid expire time in 'expire' command",
        "pexpire" => "ERR invalid expire time in 'pexpire' command",
        "expireat" => "ERR invalid expire time in 'expireat' command",
        "pexpireat" => "ERR invalid expire time in 'pexpireat' command",
        "hexpire" => "ERR invalid expire time in 'hexpire' command",
        "hpexpire" => "ERR invalid expire time in 'hpexpire' command",
        "hexpireat" => "ERR invalid expire time in 'hexpireat' command",
        "hpexpireat" => "ERR invalid expire time in 'hpexpireat' command",
        "hsetex" => "ERR invalid expire time in 'hsetex' command",
        "hgetex" => "ERR invalid expire time in 'hgetex' command",
        "msetex" => "ERR invalid expire time in 'msetex' command",
        "fillset" => "ERR invalid expire time in 'fillset' command",
        _ => "ERR invalid expire time",
    }
}

/// `ERR at least 1 input key is needed for '<cmd>' command` for the sorted-set
/// algebra (static: the commands are few and known).
fn at_least_one_key_message(cmd: &str) -> &'static str {
    match cmd {
        "zunionstore" => "ERR at least 1 input key is needed for 'zunionstore' command",
        "zinterstore" => "ERR at least 1 input key is needed for 'zinterstore' command",
        "zdiffstore" => "ERR at least 1 input key is needed for 'zdiffstore' command",
        "zunion" => "ERR at least 1 input key is needed for 'zunion' command",
        "zinter" => "ERR at least 1 input key is needed for 'zinter' command",
        "zdiff" => "ERR at least 1 input key is needed for 'zdiff' command",
        "zintercard" => "ERR at least 1 input key is needed for 'zintercard' command",
        _ => "ERR at least 1 input key is needed",
    }
}

/// What C's `%s` prints of a byte string: the bytes before the first NUL (an
/// error Redis formats with `%s` ends there).
pub fn until_nul(s: &[u8]) -> &[u8] {
    s.split(|&b| b == 0).next().unwrap_or_default()
}
