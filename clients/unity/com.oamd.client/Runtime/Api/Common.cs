// Results several namespaces share: the server's initialize answer, token usage, and the id plus
// warnings every create call returns. Each keeps the parsed JSON as Raw for fields not named here.

using System.Collections.Generic;

namespace Oamd
{
    /// <summary>The <c>initialize</c> result.</summary>
    public sealed class ServerInfo
    {
        public readonly string Name;
        public readonly string Version;
        public readonly string ProtocolVersion;
        /// <summary>Whether the "system" model can answer now (<c>model.available</c>).</summary>
        public readonly bool ModelAvailable;
        public readonly Dictionary<string, object> Capabilities;
        public readonly Dictionary<string, object> Model;
        public readonly Dictionary<string, object> Raw;

        internal ServerInfo(Dictionary<string, object> raw)
        {
            Raw = raw ?? new Dictionary<string, object>();
            var server = JsonFields.Object(Raw, "server");
            Name = JsonFields.String(server, "name");
            Version = JsonFields.String(server, "version");
            ProtocolVersion = JsonFields.String(Raw, "protocolVersion");
            Capabilities = JsonFields.Object(Raw, "capabilities");
            Model = JsonFields.Object(Raw, "model");
            ModelAvailable = JsonFields.Bool(Model, "available");
        }
    }

    /// <summary>Token counts of a turn (estimated where the backend has no tokenizer).</summary>
    public sealed class Usage
    {
        public readonly long InputTokens;
        public readonly long CachedInputTokens;
        public readonly long OutputTokens;
        public readonly long TotalTokens;

        internal Usage(Dictionary<string, object> o)
        {
            InputTokens = JsonFields.Long(o, "inputTokens");
            CachedInputTokens = JsonFields.Long(o, "cachedInputTokens");
            OutputTokens = JsonFields.Long(o, "outputTokens");
            TotalTokens = JsonFields.Long(o, "totalTokens");
        }
    }

    /// <summary>What session/create, npc/create, npc/restore and world/create answer: the id (the one
    /// given, or a generated <c>s1</c>, <c>npc1</c>, <c>w1</c>) and warnings about ignored input.</summary>
    public sealed class Created
    {
        public readonly string Id;
        public readonly List<string> Warnings;
        public readonly Dictionary<string, object> Raw;

        internal Created(Dictionary<string, object> raw, string idKey)
        {
            Raw = raw ?? new Dictionary<string, object>();
            Id = JsonFields.String(Raw, idKey);
            Warnings = JsonFields.Strings(Raw, "warnings");
        }
    }
}
