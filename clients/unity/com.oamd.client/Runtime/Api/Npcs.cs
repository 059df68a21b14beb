// npc/*: characters with a persona, memory, relationship and emotion, speaking through npc/talk (dialogue
// turns, streamed as npc/event) and npc/bark (one ambient line). Names and params are the protocol's.

using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Oamd
{
    /// <summary>An NPC persona (npc/create's <c>persona</c>, a decision's <c>actor</c>); only Name is required.</summary>
    public sealed class Persona : IJsonValue
    {
        public string Name;
        public string Role;
        public string Personality;
        public string SpeakingStyle;
        public string Backstory;
        public List<string> Goals;
        public List<string> Knowledge;
        public List<string> Secrets;
        /// <summary>Other persona members (defaultEmotion, maxSentences…).</summary>
        public Dictionary<string, object> Extra = new Dictionary<string, object>();

        public Persona(string name)
        {
            Name = name;
        }

        public object ToJson()
        {
            return new Dictionary<string, object>()
                .Put("name", Name).Put("role", Role).Put("personality", Personality)
                .Put("speakingStyle", SpeakingStyle).Put("backstory", Backstory)
                .Put("goals", Goals).Put("knowledge", Knowledge).Put("secrets", Secrets).Merge(Extra);
        }
    }

    /// <summary>The <c>npc/talk</c> result.</summary>
    public sealed class TalkResult
    {
        public readonly string Npc;
        public readonly string Line;
        public readonly string Emotion;
        public readonly List<string> PlayerOptions;
        public readonly bool EndsConversation;
        public readonly List<ToolCallRecord> ToolCalls;
        /// <summary>-100 … 100.</summary>
        public readonly long Relationship;
        /// <summary>The line is one of the fallback lines (the model refused or failed).</summary>
        public readonly bool IsFallback;
        public readonly Usage Usage;
        public readonly List<string> Warnings;
        public readonly Dictionary<string, object> Raw;

        internal TalkResult(Dictionary<string, object> raw)
        {
            Raw = raw ?? new Dictionary<string, object>();
            Npc = JsonFields.String(Raw, "npc");
            Line = JsonFields.String(Raw, "line");
            Emotion = JsonFields.String(Raw, "emotion");
            PlayerOptions = JsonFields.Strings(Raw, "playerOptions");
            EndsConversation = JsonFields.Bool(Raw, "endsConversation");
            ToolCalls = ToolCallRecord.ListOf(Raw);
            Relationship = JsonFields.Long(Raw, "relationship");
            IsFallback = JsonFields.Bool(Raw, "isFallback");
            Usage = new Usage(JsonFields.Object(Raw, "usage"));
            Warnings = JsonFields.Strings(Raw, "warnings");
        }
    }

    /// <summary>An <c>npc/event</c>; <c>Type</c> is emotion, lineDelta, lineReset, toolCallStarted or toolCallCompleted.</summary>
    public sealed class NpcEventArgs
    {
        public readonly string Npc;
        public readonly object RequestId;
        public readonly string Type;
        /// <summary>For <c>lineDelta</c>.</summary>
        public readonly string Delta;
        /// <summary>For <c>lineReset</c>: the whole line to show instead.</summary>
        public readonly string Line;
        /// <summary>For <c>emotion</c>.</summary>
        public readonly string Emotion;
        public readonly Dictionary<string, object> Event;

        internal NpcEventArgs(Dictionary<string, object> p)
        {
            Npc = JsonFields.String(p, "npc");
            RequestId = JsonFields.Get(p, "requestId");
            Event = JsonFields.Object(p, "event");
            Type = JsonFields.String(Event, "type");
            Delta = JsonFields.String(Event, "delta");
            Line = JsonFields.String(Event, "line");
            Emotion = JsonFields.String(Event, "emotion");
        }
    }

    public sealed partial class OamdClient
    {
        /// <summary><c>npc/create</c>. <paramref name="world"/> links a world the NPC may read and write
        /// (options.worldReadable/worldWritable); <paramref name="options"/>: NpcOptions as JSON.</summary>
        public async Task<Created> CreateNpcAsync(Persona persona, string npc = null, IEnumerable<ToolDefinition> tools = null,
            string world = null, object model = null, IDictionary<string, object> options = null,
            IDictionary<string, object> extra = null, CancellationToken cancellation = default(CancellationToken))
        {
            var p = new Dictionary<string, object> { { "persona", persona } }
                .Put("npc", npc).Put("tools", tools).Put("world", world).Put("model", model).Put("options", options)
                .Merge(extra);
            return new Created(await Call("npc/create", p, cancellation).ConfigureAwait(false), "npc");
        }

        /// <summary><c>npc/talk</c>: the player says <paramref name="line"/> ("" = nothing);
        /// <paramref name="context"/> (a string or JSON) informs this turn only.</summary>
        public async Task<TalkResult> TalkAsync(string npc, string line, object context = null, bool stream = false,
            IDictionary<string, object> extra = null, CancellationToken cancellation = default(CancellationToken))
        {
            var p = new Dictionary<string, object> { { "npc", npc }, { "line", line } }
                .Put("context", context).Put("stream", stream ? (object)true : null).Merge(extra);
            return new TalkResult(await Call("npc/talk", p, cancellation).ConfigureAwait(false));
        }

        /// <summary><c>npc/bark</c>: one ambient line for <paramref name="situation"/>; no history kept.</summary>
        public async Task<string> BarkAsync(string npc, object situation = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("npc", npc).Put("situation", situation);
            return JsonFields.String(await Call("npc/bark", p, cancellation).ConfigureAwait(false), "line");
        }

        /// <summary><c>npc/state</c>: the saveable state, which RestoreNpcAsync takes back.</summary>
        public async Task<Dictionary<string, object>> NpcStateAsync(string npc,
            CancellationToken cancellation = default(CancellationToken))
        {
            return JsonFields.Object(await Call("npc/state", Id("npc", npc), cancellation).ConfigureAwait(false), "state");
        }

        /// <summary><c>npc/restore</c> from a saved state; tools and model are given again (they are not saved).</summary>
        public async Task<Created> RestoreNpcAsync(Dictionary<string, object> state, string npc = null,
            IEnumerable<ToolDefinition> tools = null, object model = null, IDictionary<string, object> extra = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            var p = new Dictionary<string, object> { { "state", state } }
                .Put("npc", npc).Put("tools", tools).Put("model", model).Merge(extra);
            return new Created(await Call("npc/restore", p, cancellation).ConfigureAwait(false), "npc");
        }

        /// <summary><c>npc/update</c>: persona, options and memory are merge patches (null resets a field).</summary>
        public Task UpdateNpcAsync(string npc, IDictionary<string, object> persona = null,
            IDictionary<string, object> options = null, IDictionary<string, object> memory = null,
            IEnumerable<ToolDefinition> tools = null, CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("npc", npc).Put("persona", persona).Put("options", options).Put("memory", memory).Put("tools", tools);
            return Call("npc/update", p, cancellation);
        }

        /// <summary><c>npc/reset</c>: forgets the conversation (and memory with <paramref name="clearMemory"/>).</summary>
        public Task ResetNpcAsync(string npc, bool clearMemory = false, CancellationToken cancellation = default(CancellationToken))
        {
            var p = Id("npc", npc);
            p["clearMemory"] = clearMemory;
            return Call("npc/reset", p, cancellation);
        }

        /// <summary><c>npc/cancel</c>: cancels the running and queued turns; returns how many.</summary>
        public async Task<long> CancelNpcAsync(string npc, CancellationToken cancellation = default(CancellationToken))
        {
            return JsonFields.Long(await Call("npc/cancel", Id("npc", npc), cancellation).ConfigureAwait(false), "cancelled");
        }

        /// <summary><c>npc/delete</c>.</summary>
        public Task DeleteNpcAsync(string npc, CancellationToken cancellation = default(CancellationToken))
        {
            return Call("npc/delete", Id("npc", npc), cancellation);
        }

        /// <summary><c>npc/list</c>: the NpcSummary objects.</summary>
        public async Task<List<object>> ListNpcsAsync(CancellationToken cancellation = default(CancellationToken))
        {
            return JsonFields.List(await Call("npc/list", null, cancellation).ConfigureAwait(false), "npcs");
        }
    }
}
