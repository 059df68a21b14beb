// The daemon-wide methods: ping, model/availability, content/generate and shutdown.

using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Oamd
{
    public sealed partial class OamdClient
    {
        /// <summary><c>ping</c>.</summary>
        public Task PingAsync(CancellationToken cancellation = default(CancellationToken))
        {
            return Call("ping", null, cancellation);
        }

        /// <summary><c>model/availability</c>: <c>available</c>, <c>status</c>, <c>detail</c> (how to fix it)…</summary>
        public Task<Dictionary<string, object>> ModelAvailabilityAsync(CancellationToken cancellation = default(CancellationToken))
        {
            return Call("model/availability", null, cancellation);
        }

        /// <summary><c>content/generate</c>: JSON matching <paramref name="schema"/> (keys in schema order).</summary>
        public async Task<object> GenerateAsync(string prompt, IDictionary<string, object> schema, string instructions = null,
            object context = null, object model = null, IDictionary<string, object> extra = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = new Dictionary<string, object> { { "prompt", prompt }, { "schema", schema } }
                .Put("instructions", instructions).Put("context", context).Put("model", model).Merge(extra);
            return JsonFields.Get(await Call("content/generate", p, cancellation).ConfigureAwait(false), "content");
        }

        /// <summary><c>shutdown</c>: this connection's work ends (over stdio the daemon then exits once
        /// the client is disposed). Dispose afterwards.</summary>
        public Task ShutdownAsync(CancellationToken cancellation = default(CancellationToken))
        {
            return Call("shutdown", null, cancellation);
        }
    }
}
