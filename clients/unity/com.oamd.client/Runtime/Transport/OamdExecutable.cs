// OamdExecutable: where the self-contained daemon is. `make dist` builds a folder (dist/oamd/: the
// executable plus its _internal/ files); a Unity project copies that whole folder to
// Assets/StreamingAssets/oamd/, which a desktop build ships next to the player unchanged.

using System;
using System.IO;

namespace Oamd
{
    public static class OamdExecutable
    {
        /// <summary>True on Windows, where the executable is <c>oamd.exe</c>.</summary>
        public static bool IsWindows
        {
            get { return Environment.OSVersion.Platform == PlatformID.Win32NT; }
        }

        /// <summary><c>oamd.exe</c> on Windows, else <c>oamd</c>.</summary>
        public static string FileName
        {
            get { return IsWindows ? "oamd.exe" : "oamd"; }
        }

        /// <summary>The executable inside <paramref name="directory"/> (the folder `make dist` built).</summary>
        public static string InDirectory(string directory)
        {
            return Path.GetFullPath(Path.Combine(directory, FileName));
        }

#if UNITY_5_3_OR_NEWER
        /// <summary>The executable in StreamingAssets/<paramref name="folder"/>: the editor reads
        /// Assets/StreamingAssets, a Windows/Linux player &lt;Game&gt;_Data/StreamingAssets, a macOS player
        /// &lt;Game&gt;.app/Contents/Resources/Data/StreamingAssets. Android and iOS keep StreamingAssets inside
        /// the package where nothing can be executed: use TCP (or the Android service) there.</summary>
        public static string InStreamingAssets(string folder = "oamd")
        {
            return InDirectory(Path.Combine(UnityEngine.Application.streamingAssetsPath, folder));
        }
#endif
    }
}
