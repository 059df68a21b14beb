// The client's two failures: the daemon answered with an error (OamdException), or the connection is gone
// (OamdDisconnectedException, an IOException). Everything else a call can raise is the caller's own
// OperationCanceledException.

using System;
using System.Collections.Generic;
using System.IO;

namespace Oamd
{
    /// <summary>The daemon answered a request with a JSON-RPC error.</summary>
    public sealed class OamdException : Exception
    {
        /// <summary>The JSON-RPC number, e.g. -32002.</summary>
        public readonly long Code;
        /// <summary>The stable snake_case name from <c>error.data.code</c> (<c>session_not_found</c>), or null.</summary>
        public readonly string Name;
        /// <summary><c>error.data</c>: <c>code</c> plus whatever the error carries (<c>limit</c>, <c>retryAfter</c>, <c>auth</c>…).
        /// Hides Exception.Data on purpose: this is the protocol's data member, as JSON.</summary>
        public new readonly Dictionary<string, object> Data;

        public OamdException(long code, string message, Dictionary<string, object> data)
            : base(message)
        {
            Code = code;
            Data = data ?? new Dictionary<string, object>();
            Name = JsonFields.String(Data, "code");
        }

        internal static OamdException FromError(Dictionary<string, object> error)
        {
            return new OamdException(
                JsonFields.Long(error, "code"),
                JsonFields.String(error, "message") ?? "oamd returned an error without a message.",
                JsonFields.Get(error, "data") as Dictionary<string, object>);
        }

        public override string ToString()
        {
            return "OamdException " + Code + (Name != null ? " (" + Name + ")" : "") + ": " + Message;
        }
    }

    /// <summary>The connection to oamd closed (the daemon exited, the socket dropped, or Dispose) before an answer.</summary>
    public sealed class OamdDisconnectedException : IOException
    {
        public OamdDisconnectedException(string message) : base(message) { }
    }
}
