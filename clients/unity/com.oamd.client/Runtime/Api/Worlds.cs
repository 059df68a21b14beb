// world/*: shared JSON documents NPCs can read and write, addressed by dot paths ('gate.open',
// 'party.0.name'; '' is the root), each with a version; subscriptions report changes as world/changed.

using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Oamd
{
    /// <summary>The <c>world/get</c> result.</summary>
    public sealed class WorldValue
    {
        public readonly string World;
        public readonly string Path;
        /// <summary>The value as parsed JSON; null when absent (Exists tells absent from JSON null).</summary>
        public readonly object Value;
        public readonly bool Exists;
        public readonly long Version;

        internal WorldValue(Dictionary<string, object> o)
        {
            World = JsonFields.String(o, "world");
            Path = JsonFields.String(o, "path");
            Value = JsonFields.Get(o, "value");
            Exists = JsonFields.Bool(o, "exists");
            Version = JsonFields.Long(o, "version");
        }
    }

    /// <summary>A <c>world/changed</c> notification of a subscription.</summary>
    public sealed class WorldChangedArgs
    {
        public readonly string World;
        public readonly string Subscription;
        public readonly string Path;
        public readonly object OldValue;
        public readonly object NewValue;
        /// <summary>False when the value was created (no old value).</summary>
        public readonly bool HadOldValue;
        /// <summary>False when the value was removed (no new value).</summary>
        public readonly bool HasNewValue;

        internal WorldChangedArgs(Dictionary<string, object> p)
        {
            World = JsonFields.String(p, "world");
            Subscription = JsonFields.String(p, "subscription");
            Path = JsonFields.String(p, "path");
            OldValue = JsonFields.Get(p, "oldValue");
            NewValue = JsonFields.Get(p, "newValue");
            HadOldValue = p.ContainsKey("oldValue");
            HasNewValue = p.ContainsKey("newValue");
        }
    }

    public sealed partial class OamdClient
    {
        /// <summary><c>world/create</c> with an optional root object.</summary>
        public async Task<Created> CreateWorldAsync(string world = null, IDictionary<string, object> state = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = new Dictionary<string, object>().Put("world", world).Put("state", state);
            return new Created(await Call("world/create", p, cancellation).ConfigureAwait(false), "world");
        }

        /// <summary><c>world/get</c> of <paramref name="path"/> ("" or null: the root).</summary>
        public async Task<WorldValue> WorldGetAsync(string world, string path = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("world", world).Put("path", path);
            return new WorldValue(await Call("world/get", p, cancellation).ConfigureAwait(false));
        }

        /// <summary><c>world/set</c>: <paramref name="value"/> (null is a value) at the path; returns the new version.</summary>
        public async Task<long> WorldSetAsync(string world, string path, object value,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("world", world).Put("path", path);
            p["value"] = value;
            return JsonFields.Long(await Call("world/set", p, cancellation).ConfigureAwait(false), "version");
        }

        /// <summary><c>world/merge</c>: an RFC 7386 merge patch at the path; returns the new version.</summary>
        public async Task<long> WorldMergeAsync(string world, object patch, string path = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("world", world).Put("path", path);
            p["patch"] = patch;
            return JsonFields.Long(await Call("world/merge", p, cancellation).ConfigureAwait(false), "version");
        }

        /// <summary><c>world/remove</c>: whether something was there.</summary>
        public async Task<bool> WorldRemoveAsync(string world, string path,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("world", world);
            p["path"] = path;
            return JsonFields.Bool(await Call("world/remove", p, cancellation).ConfigureAwait(false), "removed");
        }

        /// <summary><c>world/snapshot</c>: the whole document.</summary>
        public async Task<Dictionary<string, object>> WorldSnapshotAsync(string world,
            CancellationToken cancellation = default(CancellationToken))
        {
            return JsonFields.Object(await Call("world/snapshot", Id("world", world), cancellation).ConfigureAwait(false), "state");
        }

        /// <summary><c>world/delete</c> (its subscriptions end).</summary>
        public Task DeleteWorldAsync(string world, CancellationToken cancellation = default(CancellationToken))
        {
            return Call("world/delete", Id("world", world), cancellation);
        }

        /// <summary><c>world/list</c>: the WorldSummary objects.</summary>
        public async Task<List<object>> ListWorldsAsync(CancellationToken cancellation = default(CancellationToken))
        {
            return JsonFields.List(await Call("world/list", null, cancellation).ConfigureAwait(false), "worlds");
        }

        /// <summary><c>world/subscribe</c> to changes under <paramref name="path"/>; returns the
        /// subscription id that WorldChanged events carry.</summary>
        public async Task<string> SubscribeWorldAsync(string world, string path = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("world", world).Put("path", path);
            return JsonFields.String(await Call("world/subscribe", p, cancellation).ConfigureAwait(false), "subscription");
        }

        /// <summary><c>world/unsubscribe</c>.</summary>
        public Task UnsubscribeWorldAsync(string subscription, CancellationToken cancellation = default(CancellationToken))
        {
            return Call("world/unsubscribe", Id("subscription", subscription), cancellation);
        }
    }
}
